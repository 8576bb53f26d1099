#!/usr/bin/perl
# window_counter.pl: a complete streaming worker that speaks only HTTP to
# queen_streams (or to Queen itself): a tumbling-window count per key.
#
#   register the query        POST /streams/v1/queries
#   pop a leased batch        GET  /api/v1/pop/queue/<source>?wait=true&consumerGroup=streams.<query>
#   seed from the state       POST /streams/v1/state/get
#   commit the batch          POST /streams/v1/cycle   (closed windows to the sink, open
#                                                       windows as state, the source ack)
#   idle flush                POST /streams/v1/state/get with ripe_at_or_before, then a
#                             cycle with "ack": null
#
# Each batch is one cycle, one transaction: a crash anywhere before it
# commits leaves the lease to expire and the batch to come back, folded
# again from the state the last committed cycle left. Counts are exact.
#
# Time is the message's event time: payload field --time-field (epoch ms),
# else the message's createdAt. A window closes when the watermark (the
# highest event time seen, kept in state under "__wm__") passes its end,
# or on an idle flush once the wall clock has passed its end.
#
# Only core Perl modules: HTTP::Tiny, JSON::PP, Digest::SHA, Time::Local.
use strict;
use warnings;

use Digest::SHA qw(sha256_hex);
use Getopt::Long;
use HTTP::Tiny;
use JSON::PP;
use POSIX qw(floor strftime);
use Time::HiRes qw(time sleep);
use Time::Local qw(timegm);

my %o = (
	url => 'http://127.0.0.1:6632',
	source => 'events',
	sink => 'events.counts',
	query => undef,
	window => 60,			# seconds
	grace => 0,				# seconds
	'key-field' => 'key',
	'time-field' => 'ts',
	batch => 200,
	partitions => 4,
	lease => 30,			# seconds
	wait => 1000,			# long-poll timeout, ms
	'idle-flush' => 5,		# seconds; 0 disables
	'exit-idle' => 0,		# exit after this many idle seconds (0: run forever)
	reset => 0,
	tenant => undef,
	verbose => 0,
);
GetOptions(\%o, 'url=s', 'source=s', 'sink=s', 'query=s', 'window=i', 'grace=i',
	'key-field=s', 'time-field=s', 'batch=i', 'partitions=i', 'lease=i', 'wait=i',
	'idle-flush=f', 'exit-idle=f', 'reset!', 'tenant=s', 'verbose!')
  or die "usage: $0 [--url U] [--source Q] [--sink Q] [--query NAME] [--window S] ...\n";
$o{query} //= $o{sink};

my $US = "\x{1f}";
my $TAG = "tumb:$o{window}";
my $GROUP = "streams.$o{query}";
my $SIZE = $o{window} * 1000;
my $json = JSON::PP->new->utf8->canonical;
my $http = HTTP::Tiny->new(timeout => 60, keep_alive => 1);
my %headers = ('content-type' => 'application/json');
$headers{'x-queen-tenant'} = $o{tenant} if $o{tenant};

sub say_ { print STDERR "window_counter: @_\n" if $o{verbose} }

# POST/GET with the Queen clients' retry policy: 5xx and network errors
# are retried with backoff, other statuses are the caller's.
sub call
{
	my ($method, $path, $body) = @_;
	my $delay = 0.1;
	for my $try (1 .. 6)
	{
		my $r = $http->request($method, "$o{url}$path",
			{ headers => \%headers, defined $body ? (content => $json->encode($body)) : () });
		if ($r->{status} < 500 || $try == 6)
		{
			my $doc = length($r->{content} // '') ? eval { $json->decode($r->{content}) } : undef;
			return ($r->{status}, $doc);
		}
		say_("$method $path: $r->{status} $r->{content}; retrying");
		sleep $delay;
		$delay = $delay * 2 > 5 ? 5 : $delay * 2;
	}
}

sub iso
{
	my ($ms) = @_;
	return strftime('%Y-%m-%dT%H:%M:%S', gmtime(floor($ms / 1000))) . sprintf('.%03dZ', $ms % 1000);
}

sub epoch_ms
{
	my ($iso) = @_;
	my ($y, $mo, $d, $h, $mi, $s, $frac) =
	  $iso =~ /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?/ or return undef;
	return timegm($s, $mi, $h, $d, $mo - 1, $y) * 1000 + substr(($frac // '0') . '000', 0, 3);
}

# The operator chain, hashed the way Queen's SDKs do (kind first, insertion order).
my $chain = '[{"kind":"keyBy"},{"kind":"window-tumbling","seconds":' . $o{window}
  . ',"gracePeriod":' . $o{grace} . ',"idleFlushMs":' . int($o{'idle-flush'} * 1000)
  . ',"eventTime":true,"allowedLateness":0,"onLate":"drop"},'
  . '{"kind":"aggregate","fields":["count"]},{"kind":"sink","queue":' . $json->encode($o{sink}) . '}]';

my ($st, $reg) = call('POST', '/streams/v1/queries', {
	name => $o{query}, source_queue => $o{source}, sink_queue => $o{sink},
	config_hash => sha256_hex($chain), reset => $o{reset} ? JSON::PP::true : JSON::PP::false });
die "window_counter: query $o{query} was registered with another chain; rerun with --reset "
  . "to drop its open windows\n" if $st == 409;
die "window_counter: register failed ($st): " . ($reg ? $json->encode($reg) : '') . "\n" if $st != 200;
my $qid = $reg->{query_id};
say_("query $o{query} is $qid");

my %recent;		# partition id => [name, last seen]
my $cycles = 0;

sub cycle
{
	my ($pid, $ops, $items, $ack) = @_;
	my ($cst, $res) = call('POST', '/streams/v1/cycle', {
		query_id => $qid, partition_id => $pid, consumer_group => $GROUP,
		state_ops => $ops, push_items => $items, ack => $ack });
	# a completed call is always 200: success is in the body
	if ($cst != 200 || !$res->{success})
	{
		warn "window_counter: cycle on $pid failed ($cst): "
		  . ($res->{error} // '') . "; the batch will be redelivered\n";
		return 0;
	}
	$cycles++;
	return 1;
}

sub closed_item
{
	my ($pname, $key, $start, $count) = @_;
	return { queue => $o{sink}, partition => $pname,
		payload => { key => $key, windowStart => iso($start), windowEnd => iso($start + $SIZE),
			count => $count } };
}

# Fold one partition's batch into its windows and commit it as one cycle.
sub process
{
	my ($pid, $pname, $msgs) = @_;
	my ($sst, $state) = call('POST', '/streams/v1/state/get',
		{ query_id => $qid, partition_id => $pid });
	die "window_counter: state/get failed ($sst)\n" if $sst != 200;

	my (%win, $wm);
	for my $row (@{ $state->{rows} })
	{
		if ($row->{key} eq '__wm__') { $wm = $row->{value}{eventTimeMs}; next; }
		my ($tag, $wkey, $key) = split /$US/, $row->{key}, 3;
		next unless defined $key && $tag eq $TAG;
		$win{ $row->{key} } = { key => $key, start => $row->{value}{windowStart},
			count => $row->{value}{acc}{count}, persisted => 1 };
	}

	my $late = 0;
	for my $m (sort { $a->{createdAt} cmp $b->{createdAt} || $a->{id} cmp $b->{id} } @$msgs)
	{
		my $d = $m->{data};
		my $ts = ref $d eq 'HASH' && defined $d->{ $o{'time-field'} } ? $d->{ $o{'time-field'} }
		  : epoch_ms($m->{createdAt});
		my $key = ref $d eq 'HASH' && defined $d->{ $o{'key-field'} } ? "$d->{ $o{'key-field'} }" : $pid;
		if (defined $wm && $ts < $wm) { $late++; next; }
		my $start = floor($ts / $SIZE) * $SIZE;
		my $skey = join $US, $TAG, iso($start), $key;
		$win{$skey} //= { key => $key, start => $start, count => 0 };
		$win{$skey}{count}++;
		$win{$skey}{touched} = 1;
		$wm = $ts if !defined $wm || $ts > $wm;
	}

	my (@ops, @items);
	for my $skey (sort keys %win)
	{
		my $w = $win{$skey};
		if ($w->{start} + $SIZE + $o{grace} * 1000 <= $wm)
		{
			push @items, closed_item($pname, $w->{key}, $w->{start}, $w->{count});
			push @ops, { type => 'delete', key => $skey } if $w->{persisted};
		}
		elsif ($w->{touched})
		{
			push @ops, { type => 'upsert', key => $skey, value => {
				acc => { count => $w->{count} }, windowStart => $w->{start},
				windowEnd => $w->{start} + $SIZE } };
		}
	}
	push @ops, { type => 'upsert', key => '__wm__', value => { eventTimeMs => $wm } } if defined $wm;

	my $last = $msgs->[-1];
	cycle($pid, \@ops, \@items, { transactionId => $last->{transactionId},
		leaseId => $last->{leaseId}, status => 'completed', count => scalar @$msgs });
	say_(sprintf("%s: %d messages, %d windows closed, %d late", $pname, scalar @$msgs,
		scalar @items, $late));
}

# Emit and delete the windows of partitions quiet for --idle-flush seconds
# whose end the wall clock has passed.
sub idle_flush
{
	my ($all) = @_;				# on exit: every partition, quiet or not
	my $now = floor(time * 1000);
	for my $pid (keys %recent)
	{
		my ($pname, $seen) = @{ $recent{$pid} };
		if (time - $seen > 300) { delete $recent{$pid}; next; }
		# only partitions that stopped receiving: a busy one closes by watermark
		next if !$all && time - $seen < $o{'idle-flush'};
		my ($sst, $state) = call('POST', '/streams/v1/state/get', {
			query_id => $qid, partition_id => $pid, key_prefix => "$TAG$US",
			ripe_at_or_before => $now - $o{grace} * 1000 });
		next if $sst != 200 || !@{ $state->{rows} };
		my (@ops, @items);
		for my $row (@{ $state->{rows} })
		{
			my (undef, undef, $key) = split /$US/, $row->{key}, 3;
			push @items, closed_item($pname, $key, $row->{value}{windowStart}, $row->{value}{acc}{count});
			push @ops, { type => 'delete', key => $row->{key} };
		}
		cycle($pid, \@ops, \@items, undef);
		say_(sprintf("idle flush of %s: %d windows", $pname, scalar @items));
	}
}

my $last_flush = time;
my $idle_since = time;
$SIG{TERM} = $SIG{INT} = sub { exit 0 };
while (1)
{
	my ($pst, $batch) = call('GET', "/api/v1/pop/queue/$o{source}?batch=$o{batch}&wait=true"
		  . "&timeout=$o{wait}&consumerGroup=$GROUP&partitions=$o{partitions}&leaseSeconds=$o{lease}");
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
			process($pid, $name{$pid}, $by{$pid});
			$recent{$pid} = [ $name{$pid}, time ];
		}
		$idle_since = time;
	}
	elsif ($pst != 204)
	{
		warn "window_counter: pop failed ($pst)\n";
		sleep 1;
	}
	if ($o{'idle-flush'} > 0 && time - $last_flush >= $o{'idle-flush'})
	{
		idle_flush();
		$last_flush = time;
	}
	if ($o{'exit-idle'} > 0 && time - $idle_since >= $o{'exit-idle'})
	{
		idle_flush(1) if $o{'idle-flush'} > 0;
		say_("idle for $o{'exit-idle'} s after $cycles cycles; exiting");
		last;
	}
}
