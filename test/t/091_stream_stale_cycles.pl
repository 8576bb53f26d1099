# Issue 42: a worker's idle flush racing its own main loop
# (examples/window_racer.pl: two unsynchronized loops, as Queen's SDKs run
# them) over a processing-time sliding window. Every window reaches the sink
# exactly once with the exact count and sum of its events (every event
# counted once in each of its windows), and the stale-cycle counter moved,
# so the race was really run. Variants: 20 events a second with a flush
# every 50 ms (200 windows), phase-locked and not, again through a loopback
# proxy that holds each cycle 80 ms; and a short run of the issue's own case
# (one event a second, 4 s windows sliding by 2 s, a flush every second).
# Last, a declared stream (its worker folds and flushes in one process)
# over a live feed: exact, and never a stale cycle of its own.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use HTTP::Tiny;
use IO::Socket::INET;
use IPC::Run;
use JSON::PP;
use POSIX qw(floor);
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use Time::Local qw(timegm);

my $node = qs_node('stale', <<'EOF');
queen_streams.stream_workers = 1
queen_streams.stream_poll_interval = 200
EOF
my $url = "http://127.0.0.1:$node->{qs_http_port}";
my $racer = "$FindBin::Bin/../../examples/window_racer.pl";
my $json = JSON::PP->new->canonical;

sub epoch_ms
{
	my ($iso) = @_;
	my ($y, $mo, $d, $h, $mi, $s, $frac) =
	  $iso =~ /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?/ or die "bad time $iso";
	return timegm($s, $mi, $h, $d, $mo - 1, $y) * 1000 + substr(($frac // '0') . '000', 0, 3);
}

sub stale_total
{
	my (undef, $m) = http($node, 'GET', '/metrics');
	return $m =~ /^queen_streams_stream_cycles_stale_total (\d+)$/m ? $1 : 0;
}

# A loopback proxy holding each request `hold` seconds before forwarding it
# to the listener on a connection of its own (one process per connection;
# they leave with _exit, so that only the test runs its END blocks).
sub start_proxy
{
	my ($hold) = @_;
	my $listen = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 16,
		ReuseAddr => 1) or die "proxy: $!";
	my $pid = fork // die "fork: $!";
	if ($pid == 0)
	{
		$SIG{CHLD} = 'IGNORE';
		$SIG{TERM} = sub { kill 'TERM', -$$; POSIX::_exit(0) };
		setpgrp(0, 0);
		while (my $c = $listen->accept)
		{
			next if fork;
			while (defined(my $req = read_request($c)))
			{
				sleep $hold;
				my $up = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $node->{qs_http_port})
				  or POSIX::_exit(1);
				$req =~ s/^connection:[^\n]*\n//mgi;
				$req =~ s/\r\n\r\n/\r\nConnection: close\r\n\r\n/;
				syswrite($up, $req);
				my $resp = '';
				1 while sysread($up, $resp, 65536, length $resp);
				close $up;
				syswrite($c, $resp);
				last if $resp =~ /^connection:\s*close/mi;
			}
			POSIX::_exit(0);
		}
		POSIX::_exit(0);
	}
	my $port = $listen->sockport;
	close $listen;
	return ($pid, "http://127.0.0.1:$port");
}

# One request (headers and a Content-Length body), or undef at EOF.
sub read_request
{
	my ($s) = @_;
	my $head = '';
	while ($head !~ /\r\n\r\n\z/)
	{
		my $got = sysread($s, my $ch, 1);
		return undef unless $got;
		$head .= $ch;
	}
	my ($len) = $head =~ /^content-length:\s*(\d+)/mi;
	my $body = '';
	while (length $body < ($len // 0))
	{
		my $got = sysread($s, $body, $len - length $body, length $body);
		return undef unless $got;
	}
	return $head . $body;
}

# One run: feed `n` events `every` seconds apart over `parts` partitions while
# the racer folds them; then check the sink against the source.
sub run_variant
{
	my (%v) = @_;
	my ($name, $size, $slide) = @v{qw(name size slide)};
	my ($src, $sink) = ("src_$name", "sink_$name");
	my $stale0 = stale_total();
	my @args = ($^X, $racer, '--url', $url, '--source', $src, '--sink', $sink,
		'--size-ms', $size, '--slide-ms', $slide, '--idle-flush-ms', $v{flush},
		'--exit-idle', $v{exit_idle}, '--lease', 5, '--wait', 100,
		$v{phase_lock} ? '--phase-lock' : (), $v{cycle_url} ? ('--cycle-url', $v{cycle_url}) : ());
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([@args], '>', \$out, '2>', \$err, IPC::Run::timeout(120));

	my $ua = HTTP::Tiny->new(timeout => 30, keep_alive => 1);
	my $t0 = time + 0.5;
	for my $i (1 .. $v{n})
	{
		my $at = $t0 + ($i - 1) * $v{every};
		my $nap = $at - time;
		sleep $nap if $nap > 0;
		my $r = $ua->request('POST', "$url/api/v1/push", { headers => { 'content-type' => 'application/json' },
			content => $json->encode({ items => [ { queue => $src, partition => 'p' . ($i % $v{parts}),
				payload => { v => $i } } ] }) });
		die "push failed: $r->{status} $r->{content}" unless $r->{status} == 201;
	}
	$h->finish;
	my @loops = map { $json->decode($_) } grep { /^\{/ } split /\n/, $out;
	my %n;
	for my $l (@loops) { $n{$_} += $l->{$_} for grep { $_ ne 'loop' } keys %$l }
	note("$name: " . $json->encode(\%n));
	is($n{failed_main} + $n{failed_flush}, 0, "$name: no cycle failed but as stale");

	# the source, read again by a group of its own: what each window must hold
	my %want;
	while (1)
	{
		my $r = json_sql($node, "queen.pop('$src', consumer_group => 'verify', batch => 10000,"
			  . " auto_ack => true, partitions => 10)");
		last unless @{ $r->{messages} };
		for my $m (@{ $r->{messages} })
		{
			my $ts = epoch_ms($m->{createdAt});
			for (my $s = floor($ts / $slide) * $slide; $s > $ts - $size; $s -= $slide)
			{
				my $w = $want{"$m->{partitionId}/$s"} //= { count => 0, sum => 0 };
				$w->{count}++;
				$w->{sum} += $m->{data}{v};
			}
		}
	}
	my (%got, $dups);
	while (1)
	{
		my $r = json_sql($node, "queen.pop('$sink', batch => 10000, auto_ack => true, partitions => 10)");
		last unless @{ $r->{messages} };
		for my $m (@{ $r->{messages} })
		{
			my $d = $m->{data};
			my $k = "$d->{key}/$d->{windowStart}";
			$dups++ if exists $got{$k};
			$got{$k} = { count => $d->{count}, sum => $d->{sum} };
		}
	}
	is($dups // 0, 0, "$name: no window in the sink twice");
	is_deeply(\%got, \%want, "$name: every window once, with the exact count and sum");
	cmp_ok(scalar keys %want, '>=', $v{windows}, "$name: at least $v{windows} windows");
	my $stale = stale_total() - $stale0;
	cmp_ok($stale, '>', 0, "$name: stale cycles were refused ($stale), so the loops raced");
	is($n{stale_main} + $n{stale_flush}, $stale, "$name: the racer saw each refusal as stale");
	return $stale;
}

my %fast = (size => 100, slide => 50, flush => 50, every => 0.05, n => 200, parts => 1,
	exit_idle => 2, windows => 200);
run_variant(%fast, name => 'fast_locked', phase_lock => 1);
run_variant(%fast, name => 'fast_free', phase_lock => 0);

our $proxy;
END { kill 'TERM', $proxy if $proxy }
($proxy, my $proxy_url) = start_proxy(0.08);
run_variant(%fast, name => 'fast_proxy', phase_lock => 1, n => 100, windows => 100,
	cycle_url => $proxy_url);
kill 'TERM', $proxy;
waitpid $proxy, 0;
$proxy = undef;

run_variant(name => 'issue', size => 4000, slide => 2000, flush => 1000, every => 1, n => 6,
	parts => 1, exit_idle => 7, windows => 3, phase_lock => 1);

# ---- a declared stream: one worker folds and idle-flushes, never stale
is($node->safe_psql('postgres', "SELECT queen_streams.create_stream('dec.hop', '"
	  . $json->encode({ source => 'dec_src', sink => 'dec_sink', window => { type => 'hopping', size => 2,
		slide => 1 }, time => { type => 'processing' }, batch => 5, idle_flush => 1,
		aggregates => { n => { fn => 'count' }, total => { fn => 'sum', path => '$.v' } } })
	  . "'::jsonb)->>'success'"), 'true', 'a declared hopping stream');
my $ua = HTTP::Tiny->new(timeout => 30, keep_alive => 1);
my $t0 = time;
for my $i (1 .. 40)
{
	my $nap = $t0 + $i * 0.1 - time;
	sleep $nap if $nap > 0;
	my $r = $ua->request('POST', "$url/api/v1/push", { headers => { 'content-type' => 'application/json' },
		content => $json->encode({ items => [ { queue => 'dec_src', partition => 'd' . ($i % 2),
			payload => { v => $i } } ] }) });
	die "push failed: $r->{status}" unless $r->{status} == 201;
}
ok($node->poll_query_until('postgres', "SELECT coalesce(sum(lag), 1) = 0 AND sum(open_windows) = 0"
	  . " FROM queen_streams.stream_status('dec.hop') WHERE partition IS NOT NULL"),
	'dec.hop: folded and flushed to the end');
is($node->safe_psql('postgres', "SELECT sum(stale_cycles), sum(errors), sum(events)"
	  . " FROM queen_streams.stream_status('dec.hop')"), '0|0|40',
	'dec.hop: every event folded once, no error, no stale cycle of its own');
my $sink = $node->safe_psql('postgres', <<'EOF');
SELECT sum((m->'data'->>'n')::int), sum((m->'data'->>'total')::int),
       count(*) = count(DISTINCT (m->>'partition', m->'data'->>'key', m->'data'->>'windowStart'))
  FROM jsonb_array_elements(queen.pop('dec_sink', batch => 10000, auto_ack => true,
                                      partitions => 10)->'messages') m
EOF
is($sink, '80|1640|t', 'dec.hop: each event in its two windows, each window once');

$node->stop;
done_testing();
