#!/usr/bin/perl
# window_racer.pl: a sliding-window worker shaped like Queen's stream SDKs,
# two loops with no lock between them, over HTTP only (issue 42):
#
#   main loop (this process)   pop a leased batch -> POST /streams/v1/state/get
#                              (all keys) -> fold -> POST /streams/v1/cycle with
#                              the source ack: closed windows to the sink and
#                              deleted if they had a row, open ones upserted
#   flush timer (a child)      every --idle-flush-ms: state/get with
#                              ripe_at_or_before = now -> cycle with "ack": null
#                              deleting the ripe rows and pushing them
#
# Processing time: an event's time is its createdAt; a batch closes the
# windows whose end is at or before its latest createdAt. Each window holds
# {"count", "sum"} of the payload field --value-field; its sink message is
# {"key", "windowStart", "windowEnd", "count", "sum"} (epoch ms).
#
# The broker refuses the cycle that would count an event twice or lose one
# (README: Streams, stale cycles): it answers success:false, "stale":true,
# and the loop goes on as the SDKs do (the flush re-reads on its next tick;
# a refused batch comes back when its lease ends).
#
# --phase-lock starts the flush timer at the first event's createdAt and
# ticks it on that grid, so flushes land in step with a steady feed, the
# timing under which the race repeats every window. --exit-idle S: exit
# once no event came for S seconds. On exit it prints one JSON line of
# counters (cycles, flushes, stale and failed, per loop) on stdout.
#
# Only core Perl modules: HTTP::Tiny, JSON::PP, Digest::SHA, IO::Select.
use strict;
use warnings;

use Digest::SHA qw(sha256_hex);
use Getopt::Long;
use HTTP::Tiny;
use IO::Handle;
use IO::Select;
use JSON::PP;
use POSIX qw(floor);
use Time::HiRes qw(time sleep);
use Time::Local qw(timegm);

my %o = (
	url => 'http://127.0.0.1:6632',
	'cycle-url' => undef,	# cycles only through here (a proxy), if given
	source => 'events',
	sink => 'events.windows',
	query => undef,
	'size-ms' => 4000,
	'slide-ms' => 2000,
	'value-field' => 'v',
	batch => 100,
	lease => 5,
	wait => 200,			# long-poll timeout, ms
	'idle-flush-ms' => 1000,
	'phase-lock' => 0,
	'exit-idle' => 0,
	reset => 1,
	verbose => 0,
);
GetOptions(\%o, 'url=s', 'cycle-url=s', 'source=s', 'sink=s', 'query=s', 'size-ms=i', 'slide-ms=i',
	'value-field=s', 'batch=i', 'lease=i', 'wait=i', 'idle-flush-ms=i', 'phase-lock!',
	'exit-idle=f', 'reset!', 'verbose!')
  or die "usage: $0 [--url U] [--source Q] [--sink Q] [--size-ms N] [--slide-ms N] ...\n";
die "window_racer: --size-ms must be a multiple of --slide-ms\n"
  if $o{'slide-ms'} <= 0 || $o{'size-ms'} % $o{'slide-ms'};
$o{query} //= $o{sink};
$o{'cycle-url'} //= $o{url};

my $US = "\x{1f}";
my ($SIZE, $SLIDE) = ($o{'size-ms'}, $o{'slide-ms'});
my $TAG = "slide:$SIZE:$SLIDE";
my $GROUP = "streams.$o{query}";
my $json = JSON::PP->new->utf8->canonical;
my %headers = ('content-type' => 'application/json');
my $http;
my %n = map { $_ => 0 } qw(cycles flushes stale_main stale_flush failed_main failed_flush);

sub say_ { print STDERR "window_racer[$$]: @_\n" if $o{verbose} }

# The Queen clients' retry policy: 5xx and network errors retried with backoff.
sub call
{
	my ($method, $url, $body) = @_;
	my $delay = 0.1;
	for my $try (1 .. 6)
	{
		my $r = $http->request($method, $url,
			{ headers => \%headers, defined $body ? (content => $json->encode($body)) : () });
		if ($r->{status} < 500 || $try == 6)
		{
			my $doc = length($r->{content} // '') ? eval { $json->decode($r->{content}) } : undef;
			return ($r->{status}, $doc);
		}
		sleep $delay;
		$delay = $delay * 2 > 5 ? 5 : $delay * 2;
	}
}

sub epoch_ms
{
	my ($iso) = @_;
	my ($y, $mo, $d, $h, $mi, $s, $frac) =
	  $iso =~ /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?/ or return undef;
	return timegm($s, $mi, $h, $d, $mo - 1, $y) * 1000 + substr(($frac // '0') . '000', 0, 3);
}

sub item
{
	my ($pname, $key, $start, $acc) = @_;
	return { queue => $o{sink}, partition => $pname, payload => { key => $key,
		windowStart => $start, windowEnd => $start + $SIZE, count => $acc->{count}, sum => $acc->{sum} } };
}

# One cycle; 1 if it committed. A failed one is reported and the loop goes on.
sub cycle
{
	my ($who, $pid, $ops, $items, $ack) = @_;
	my ($st, $res) = call('POST', "$o{'cycle-url'}/streams/v1/cycle", {
		query_id => $main::qid, partition_id => $pid, consumer_group => $GROUP,
		state_ops => $ops, push_items => $items, ack => $ack });
	if ($st == 200 && $res && $res->{success})
	{
		$n{cycles}++;
		return 1;
	}
	if ($st == 200 && $res && $res->{stale}) { $n{"stale_$who"}++ }
	else { $n{"failed_$who"}++ }
	say_("$who cycle on $pid refused ($st): " . ($res && $res->{error} ? $res->{error} : ''));
	return 0;
}

my $chain = $json->encode([ { kind => 'window-sliding', size => $SIZE, slide => $SLIDE,
	gracePeriod => 0, idleFlushMs => $o{'idle-flush-ms'}, eventTime => JSON::PP::false },
	{ kind => 'aggregate', fields => [qw(count sum)] }, { kind => 'sink', queue => $o{sink} } ]);
$http = HTTP::Tiny->new(timeout => 60, keep_alive => 1);
my ($rst, $reg) = call('POST', "$o{url}/streams/v1/queries", {
	name => $o{query}, source_queue => $o{source}, sink_queue => $o{sink},
	config_hash => sha256_hex($chain), reset => $o{reset} ? JSON::PP::true : JSON::PP::false });
die "window_racer: register failed ($rst)\n" if $rst != 200;
our $qid = $reg->{query_id};

# The flush timer: a child, fed (pid, partition name, first createdAt) by the main loop.
pipe(my $rd, my $wr) or die "pipe: $!";
$wr->autoflush(1);
my $child = fork // die "fork: $!";
if ($child == 0)
{
	close $wr;
	$http = HTTP::Tiny->new(timeout => 60, keep_alive => 1);
	my $sel = IO::Select->new($rd);
	my (%parts, $t0);
	my $stop = 0;
	$SIG{TERM} = sub { $stop = 1 };
	my $next = time;
	my $buf = '';
	while (!$stop)
	{
		while ($sel->can_read(0))
		{
			my $got = sysread($rd, $buf, 4096, length $buf);
			last unless $got;
			while ($buf =~ s/^([^\n]*)\n//)
			{
				my ($pid, $pname, $first) = split /\t/, $1;
				$parts{$pid} = $pname;
				if (!defined $t0)
				{
					$t0 = $o{'phase-lock'} ? $first / 1000 : time;
					$next = $t0;
				}
			}
		}
		# each tick waits for the one before it, as a timer that awaits its flush does
		my $now = time;
		if (defined $t0 && $now >= $next)
		{
			for my $pid (sort keys %parts)
			{
				my ($st, $state) = call('POST', "$o{url}/streams/v1/state/get", {
					query_id => $qid, partition_id => $pid, key_prefix => "$TAG$US",
					ripe_at_or_before => floor(time * 1000) });
				next if $st != 200 || !$state || !@{ $state->{rows} };
				my (@ops, @items);
				for my $row (@{ $state->{rows} })
				{
					my (undef, undef, $key) = split /$US/, $row->{key}, 3;
					push @items, item($parts{$pid}, $key, $row->{value}{windowStart}, $row->{value}{acc});
					push @ops, { type => 'delete', key => $row->{key} };
				}
				$n{flushes}++ if cycle('flush', $pid, \@ops, \@items, undef);
			}
			$next += $o{'idle-flush-ms'} / 1000 while $next <= time;
		}
		my $nap = defined $t0 ? $next - time : 0.01;
		sleep($nap > 0.01 ? 0.01 : ($nap > 0 ? $nap : 0)) if $nap > 0;
	}
	print STDOUT $json->encode({ loop => 'flush', %n }), "\n";
	exit 0;
}
close $rd;

# The main loop: fold each partition's batch on the state it reads, one cycle each.
sub process
{
	my ($pid, $pname, $msgs) = @_;
	my ($sst, $state) = call('POST', "$o{url}/streams/v1/state/get", { query_id => $qid, partition_id => $pid });
	if ($sst != 200)
	{
		$n{failed_main}++;
		return;
	}
	my %win;
	for my $row (@{ $state->{rows} })
	{
		my ($tag, undef, $key) = split /$US/, $row->{key}, 3;
		next unless defined $key && $tag eq $TAG;
		$win{ $row->{key} } = { key => $key, start => $row->{value}{windowStart},
			acc => { %{ $row->{value}{acc} } }, persisted => 1 };
	}
	my $clock;
	for my $m (sort { $a->{createdAt} cmp $b->{createdAt} || $a->{id} cmp $b->{id} } @$msgs)
	{
		my $ts = epoch_ms($m->{createdAt});
		my $d = $m->{data};
		my $v = ref $d eq 'HASH' && defined $d->{ $o{'value-field'} } ? $d->{ $o{'value-field'} } : 0;
		$clock = $ts if !defined $clock || $ts > $clock;
		for (my $start = floor($ts / $SLIDE) * $SLIDE; $start > $ts - $SIZE; $start -= $SLIDE)
		{
			my $skey = join $US, $TAG, $start, $pid;
			$win{$skey} //= { key => $pid, start => $start, acc => { count => 0, sum => 0 } };
			$win{$skey}{acc}{count}++;
			$win{$skey}{acc}{sum} += $v;
			$win{$skey}{touched} = 1;
		}
	}
	my (@ops, @items);
	for my $skey (sort keys %win)
	{
		my $w = $win{$skey};
		if ($w->{start} + $SIZE <= $clock)
		{
			push @items, item($pname, $w->{key}, $w->{start}, $w->{acc});
			push @ops, { type => 'delete', key => $skey } if $w->{persisted};
		}
		elsif ($w->{touched})
		{
			push @ops, { type => 'upsert', key => $skey, value => { acc => $w->{acc},
				windowStart => $w->{start}, windowEnd => $w->{start} + $SIZE } };
		}
	}
	my $last = $msgs->[-1];
	cycle('main', $pid, \@ops, \@items, { transactionId => $last->{transactionId},
		leaseId => $last->{leaseId}, status => 'completed', count => scalar @$msgs });
}

my $stop = 0;
$SIG{TERM} = $SIG{INT} = sub { $stop = 1 };
my %told;
my $idle_since = time;
while (!$stop)
{
	my ($pst, $batch) = call('GET', "$o{url}/api/v1/pop/queue/$o{source}?batch=$o{batch}&wait=true"
		  . "&timeout=$o{wait}&consumerGroup=$GROUP&partitions=4&leaseSeconds=$o{lease}");
	if ($pst == 200 && $batch && @{ $batch->{messages} })
	{
		my (%by, %name);
		for my $m (@{ $batch->{messages} })
		{
			push @{ $by{ $m->{partitionId} } }, $m;
			$name{ $m->{partitionId} } = $m->{partition};
		}
		for my $pid (sort keys %by)
		{
			print $wr join("\t", $pid, $name{$pid}, epoch_ms($by{$pid}[0]{createdAt})), "\n"
			  unless $told{$pid}++;
			process($pid, $name{$pid}, $by{$pid});
		}
		$idle_since = time;
	}
	elsif ($pst != 204)
	{
		say_("pop failed ($pst)");
		sleep 0.2;
	}
	last if $o{'exit-idle'} > 0 && time - $idle_since >= $o{'exit-idle'};
}
kill 'TERM', $child;
waitpid $child, 0;
print STDOUT $json->encode({ loop => 'main', %n }), "\n";
