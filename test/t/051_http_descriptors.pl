# File descriptors of the listener (issue 13, point 5): the workers raise
# their soft descriptor limit to the hard one, so more idle connections than
# the usual 1,024 per worker are held and /health still answers; beyond
# queen_streams.max_connections a connection is answered 503 at once (before
# descriptors run out), and the worker's descriptors stay bounded.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use IO::Socket::INET;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

# this test holds a few thousand sockets itself
system('prlimit', "--pid=$$", '--nofile=8192:8192') == 0
  or plan skip_all => 'cannot raise the test\'s own descriptor limit';

my $node = qs_node('fds', "queen_streams.max_connections = 3000\nqueen_streams.idle_timeout = 600000\n"
	. "queen_streams.header_timeout = 600000\n");
my $port = $node->{qs_http_port};
my @pids = split /\n/, $node->safe_psql('postgres', 'SELECT pid FROM queen_streams.http_workers() ORDER BY 1');
is(scalar @pids, 2, 'two workers');

for my $pid (@pids)
{
	my ($soft, $hard) = (`cat /proc/$pid/limits` =~ /^Max open files\s+(\S+)\s+(\S+)/m);
	is($soft, $hard, "worker $pid: soft descriptor limit raised to the hard one ($hard)");
}

sub fds { my $pid = shift; opendir(my $d, "/proc/$pid/fd") or return -1; my $n = () = readdir($d); return $n - 2; }

sub health
{
	my $t0 = time;
	my $out = raw_request($node, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 10);
	my ($st) = $out =~ m{^HTTP/1\.1 (\d{3})};
	return ($st // 'none', time - $t0, $out);
}

# 2,200 idle connections: more than 1,024 per worker with two workers
my @idle;
for (1 .. 2200)
{
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp') or last;
	push @idle, $s;
}
is(scalar @idle, 2200, 'opened 2,200 idle connections');
usleep(500_000);
my ($st, $took) = health();
is($st, 200, '/health answers 200 beside them');
ok($took < 5, sprintf('promptly (%.1f s)', $took));
cmp_ok(fds($pids[0]) + fds($pids[1]), '>', 2200, 'the workers hold them all');

# beyond max_connections: 503 at once, no descriptor kept
$node->safe_psql('postgres', 'ALTER SYSTEM SET queen_streams.max_connections = 100');
$node->reload;
usleep(500_000);
my $out;
($st, $took, $out) = health();
is($st, 503, 'over max_connections: /health answers 503');
like($out, qr/Retry-After: 1/i, 'with Retry-After');
ok($took < 5, sprintf('promptly (%.1f s)', $took));
my @extra;
for (1 .. 300)
{
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp') or last;
	push @extra, $s;
}
usleep(1_500_000);    # refused connections linger at most a second
my $held = fds($pids[0]) + fds($pids[1]);
cmp_ok($held, '<', 2200 + 150, "300 more connections over the limit are not held ($held descriptors)");
my $answered = 0;
for my $s (@extra)
{
	$s->blocking(0);
	my $n = sysread($s, my $b, 4096);
	$answered++ if defined $n && $b =~ m{^HTTP/1\.1 503};
}
is($answered, 300, 'each of them was told 503');
close $_ for @extra;

# once the idle ones are gone, served again
close $_ for @idle;
usleep(1_000_000);
($st) = health();
is($st, 200, 'served again once the connections closed');

$node->stop;
done_testing();
