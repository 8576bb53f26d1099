# Hostile and vanishing clients (issue 37): partial request heads held open
# do not spin the listener's workers, parked long-polls whose clients go
# away are dropped at once (their places under max_connections freed, no
# socket left in CLOSE-WAIT, no message leased or consumed for them), and a
# long-poll's timeout is clamped to pop_max_wait. Loopback only, every loop
# bounded in count and time. See src/http/screen.c and src/http/parked.c.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use IO::Socket::INET;
use JSON::PP;
use POSIX ();
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

# partial heads must outlive the 20 s of (a); waits are clamped to 8 s.
# (a) runs after (b) and (c): the old listener kept closed partial heads
# until header_timeout, which would have filled (b)'s max_connections.
my $node = qs_node('hostile_clients', "queen_streams.header_timeout = 30000\n"
	  . "queen_streams.pop_max_wait = 8000\n");
my $port = $node->{qs_http_port};

sub connect_raw
{
	my $s = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $port,
		Proto => 'tcp',
		Timeout => 5) or die "connect: $!";
	return $s;
}

# GET /health on a fresh connection: (status, seconds)
sub health
{
	my $t0 = time;
	my $s = connect_raw();
	print $s "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	my ($st) = read_response($s, 5);
	my $took = time - $t0;
	close $s;
	return ($st, $took);
}

# utime + stime of a process, in seconds
sub cpu_seconds
{
	my ($pid) = @_;
	open(my $f, '<', "/proc/$pid/stat") or die "/proc/$pid/stat: $!";
	my $line = <$f>;
	close $f;
	$line =~ s/^.*\) //;    # past the command name, which may hold spaces
	my @f = split ' ', $line;
	return ($f[11] + $f[12]) / POSIX::sysconf(POSIX::_SC_CLK_TCK);
}

# Sockets of the listener's port in CLOSE-WAIT (state 08 in /proc/net/tcp)
sub close_wait
{
	my $hex = sprintf('%04X', $port);
	my $n = 0;
	for my $file ('/proc/net/tcp', '/proc/net/tcp6')
	{
		open(my $f, '<', $file) or next;
		while (my $l = <$f>)
		{
			my @c = split ' ', $l;
			$n++ if defined $c[3] && $c[1] =~ /:$hex$/ && $c[3] eq '08';
		}
		close $f;
	}
	return $n;
}

# Connections the workers hold (screened ones included)
sub conns
{
	return $node->safe_psql('postgres', 'SELECT sum(connections) FROM queen_streams.http_workers()');
}

sub settings
{
	my (%set) = @_;
	$node->safe_psql('postgres', "ALTER SYSTEM SET queen_streams.$_ = '$set{$_}'") for sort keys %set;
	$node->reload;
	usleep(500_000);    # the workers read it at their next wait, woken by SIGHUP
}

my ($t0, $s, $deadline);

# ---- (b) max_connections parked pops whose clients vanish
settings(max_connections => 6);
my @parked = map { park_pop($node, '/api/v1/pop/queue/gone?wait=true&timeout=60000') } 1 .. 6;
is(wait_parked($node, 6), 6, 'max_connections pops parked');
my ($st) = http($node, 'GET', '/health');
is($st, 503, 'one more connection is over max_connections');
$t0 = time;
close $_ for @parked;
$deadline = time + 3;
usleep(20_000) while (parked_pops($node) != 0 || close_wait() != 0) && time < $deadline;
is(parked_pops($node), 0, 'the parked pops of the clients that left are dropped');
is(close_wait(), 0, 'no socket of the listener is left in CLOSE-WAIT');
my ($pst) = http_json($node, 'POST', '/api/v1/push',
	{ items => [ { queue => 'gone', payload => { n => 1 } } ] });
is($pst, 201, 'a push is served');
$s = park_pop($node, '/api/v1/pop/queue/gone?autoAck=true&wait=true&timeout=3000');
my ($pop_st, $body) = read_response($s, 5);
close $s;
is($pop_st, 200, 'a live pop is served');
is(eval { decode_json($body)->{messages}[0]{data}{n} }, 1, 'and gets the message');
ok(time - $t0 < 7, 'all before the pops would have timed out (pop_max_wait)');
settings(max_connections => 1000);

# ---- (c) autoAck long-polls killed mid-wait: every message reaches the live consumer once
my $child = fork();
die "fork: $!" unless defined $child;
if ($child == 0)
{
	my @mine = map { park_pop($node, '/api/v1/pop/queue/aa?autoAck=true&wait=true&timeout=60000') } 1 .. 4;
	sleep 60;
	POSIX::_exit(0);
}
is(wait_parked($node, 4), 4, 'four autoAck long-polls parked');
kill 'KILL', $child;
waitpid($child, 0);
($pst) = http_json($node, 'POST', '/api/v1/push',
	{ items => [ map { { queue => 'aa', payload => { n => $_ } } } 1 .. 20 ] });
is($pst, 201, 'twenty messages pushed right after the pollers were killed');
my %seen;
my $got = 0;
$deadline = time + 10;
for (my $i = 0; $i < 50 && time < $deadline; $i++)
{
	my ($pst2, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/aa?autoAck=true&batch=100&wait=true&timeout=500');
	last if $pst2 == 204 && $got >= 20;
	next unless $pst2 == 200;
	for my $m (@{ $doc->{messages} })
	{
		$seen{ $m->{data}{n} }++;
		$got++;
	}
}
is($got, 20, 'the live consumer got twenty messages');
is(join(',', grep { ($seen{$_} // 0) != 1 } 1 .. 20), '', 'each exactly once');
is(parked_pops($node), 0, 'nothing left parked');

# an autoAck pop whose client left while it waited for its group is not run
settings(group_commit_max_wait => 1000);
($pst) = http_json($node, 'POST', '/api/v1/push', { items => [ { queue => 'ab', payload => { n => 7 } } ] });
is($pst, 201, 'one message pushed');
$s = park_pop($node, '/api/v1/pop/queue/ab?autoAck=true');
close $s;    # before its group runs, up to group_commit_max_wait later
usleep(1_500_000);
settings(group_commit_max_wait => 0);
my ($lst, $ldoc) = http_json($node, 'GET', '/api/v1/pop/queue/ab?autoAck=true&wait=true&timeout=2000');
is($lst, 200, 'a live pop after it is served');
is(eval { $ldoc->{messages}[0]{data}{n} }, 7, 'with the message the pop of the client that left did not take');

# ---- (a) 200 partial heads held for 20 s: no spinning, /health answers
my @workers = split /\n/, $node->safe_psql('postgres',
	'SELECT pid FROM queen_streams.http_workers() ORDER BY worker');
is(scalar @workers, 2, 'two listener workers');
my @partial;
for (1 .. 200)
{
	my $s = connect_raw();
	print $s "GET / HTTP/1.1\r\nHost: x\r\n";    # and nothing more
	push @partial, $s;
}
usleep(300_000);
my %cpu0 = map { $_ => cpu_seconds($_) } @workers;
$t0 = time;
my (@lat, $bad);
$bad = 0;
for (my $i = 0; $i < 2000 && time - $t0 < 20; $i++)
{
	my ($st, $took) = health();
	$bad++ if !defined $st || $st != 200;
	push @lat, $took;
	usleep(20_000);
}
my $elapsed = time - $t0;
my %cpu1 = map { $_ => cpu_seconds($_) } @workers;
@lat = sort { $a <=> $b } @lat;
my $p99 = $lat[ int(0.99 * $#lat) ];
is($bad, 0, sprintf('/health answered 200 all %d times beside 200 partial heads', scalar @lat));
ok($p99 < 0.050, sprintf('/health within 50 ms at the 99th percentile (%.1f ms, median %.1f ms)',
		1000 * $p99, 1000 * $lat[ $#lat / 2 ]));
for my $pid (@workers)
{
	my $pct = 100 * ($cpu1{$pid} - $cpu0{$pid}) / $elapsed;
	ok($pct < 10, sprintf('worker %d used %.1f%% CPU over %.0f s', $pid, $pct, $elapsed));
}
my $open = 0;
for my $s (@partial)
{
	$s->blocking(0);
	my $n = sysread($s, my $buf, 100);
	$open++ if !defined $n;    # EAGAIN: still waiting for the rest of its head
}
is($open, 200, 'the partial heads are still held (header_timeout has not passed)');
close $_ for @partial;
# a client that leaves before its head is complete is let go at once
$deadline = time + 3;
usleep(20_000) while conns() != 0 && time < $deadline;
is(conns(), 0, 'the partial heads are let go as soon as their clients close');

# ---- (d) the timeout clamp (pop_max_wait = 8 s in this node's configuration)
my @long = map { [ $_, park_pop($node, "/api/v1/pop/queue/quiet?wait=true&timeout=$_") ] }
  ('3600000', '2147483647', '99999999999999');
$s = park_pop($node, '/api/v1/pop/queue/quiet?wait=true&timeout=300');
my ($cst, undef, $waited) = read_response($s, 6);
close $s;
ok(defined $cst && $cst == 204 && $waited < 1.2, sprintf('a timeout under the cap is kept (%.2f s)', $waited));
$t0 = time;
for my $l (@long)
{
	my ($t, $ls) = @$l;
	my ($lst) = read_response($ls, 14 - (time - $t0));
	my $at = time - $t0;
	close $ls;
	is($lst, 204, "timeout=$t is clamped, not refused");
	ok(defined $lst && $at >= 6.5 && $at < 13, sprintf("answered at pop_max_wait (%.2f s after the first)", $at));
}

$node->stop;
done_testing();
