# A partition whose window outgrows the shared dedup cache is probed by key
# (queen.log_txn_keys), and is cached again once its window fits: the cache
# does not give up on it for good, nor on a new partition when every place
# was taken, nor on an id whose first copy left the window. /metrics shows the cache's occupancy,
# its evictions and the probes by key. Every verdict is
# checked on the way.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use JSON::PP;
use QsHttp;
use Test::More;

my $node = qs_node('dedup_overflow', "queen_streams.dedup_cache_entries = 1024\n");
my $json = JSON::PP->new;

my $session = '';    # SQL run before each push, in its session

# Push ids to one partition in one request: the statuses, in order.
sub push_ids
{
	my ($part, @ids) = @_;
	my $body = $json->encode({ items => [ map {
		{ queue => 'over', partition => $part, transactionId => $_, payload => { id => $_ } } } @ids ] });
	my $out = $node->safe_psql('postgres', "$session SELECT queen.push_text(\$b\$$body\$b\$)");
	return map { $_->{status} } @{ $json->decode($out) };
}

sub count_of { my ($want, @st) = @_; return scalar grep { $_ eq $want } @st; }

# The dedup series of GET /metrics, by name (and state label).
sub dedup_metrics
{
	my ($status, $body) = http($node, 'GET', '/metrics');
	die "GET /metrics: $status" unless $status == 200;
	my %m;
	$m{ $1 . ($2 // '') } = $3
	  while $body =~ /^queen_streams_dedup_(\w+?)(?:\{state="(\w+)"\})? (\d+)$/mg;
	return \%m;
}

$node->safe_psql('postgres',
	q{SELECT queen.configure('{"queue":"over","options":{"dedupWindowSeconds":5}}')});

my $m = dedup_metrics();
is($m->{cache_capacity}, 1024, 'the capacity is the setting');
is($m->{cache_hashes}, 0, 'nothing cached yet');

# 800 hashes fit; 400 more into the same partition do not: it stops being cached.
is(count_of('queued', push_ids('a', map { "a-$_" } 1 .. 800)), 800, '800 ids queued');
is(count_of('queued', push_ids('a', map { "a-$_" } 801 .. 1200)), 400, '400 more queued past the full cache');
$m = dedup_metrics();
is($m->{cache_partitionsuncached}, 1, 'the partition is no longer cached');
cmp_ok($m->{cache_evictions_total}, '>=', 1, 'an eviction is counted');
cmp_ok($m->{cache_hashes}, '<', 768, 'the cache made room below three quarters');

# Uncached, its duplicates are still found, through queen.log_txn_keys
# (written by the probe, from the hash rows, under the row lock).
my $reads = $m->{key_probes_total};
my @st = push_ids('a', map { "a-$_" } 1 .. 5, 1196 .. 1200);
is(count_of('duplicate', @st), 10, 'looked up by key, old ids are duplicates');
cmp_ok(dedup_metrics()->{key_probes_total}, '>', $reads, 'the probe looked its hashes up');
is($node->safe_psql('postgres', q{SELECT count(*) FROM queen.log_txn_keys k
	JOIN queen.log_partitions p ON p.id = k.partition_id WHERE p.name = 'a'}), 1200,
	'every hash stored before the probe is a key');
is(dedup_metrics()->{cache_partitionsuncached}, 1, 'a window of 1,200 hashes stays uncached');

# Once the window has emptied, a read finds it small: the next push caches it again.
sleep 6;
is(count_of('queued', push_ids('a', map { "b-$_" } 1 .. 10)), 10, 'past the window, fresh ids queued');
is(count_of('queued', push_ids('a', map { "a-$_" } 1 .. 10)), 10, 'ids past their window are queued again');
$m = dedup_metrics();
is($m->{cache_partitionsuncached}, 0, 'the partition is cached again');
is($m->{cache_partitionscached}, 1, 'and answered from the cache');
$reads = $m->{window_reads_total};
my $probes = $m->{key_probes_total};
@st = push_ids('a', map { "b-$_" } 1 .. 10);
is(count_of('duplicate', @st), 10, 'cached again, the ids it caught up on are duplicates');
@st = push_ids('a', map { "a-$_" } 1 .. 10, map { "c-$_" } 1 .. 10);
is(count_of('duplicate', @st), 10, 'so are the ids recorded since');
is(count_of('queued', @st), 10, 'fresh ids are queued');
is(dedup_metrics()->{window_reads_total}, $reads, 'without reading the window');
is(dedup_metrics()->{key_probes_total}, $probes, 'nor looking keys up');

# A partition past queen_streams.dedup_partition_entries stays uncached:
# its next pushes go by key, they do not cache it again each time.
$session = 'SET queen_streams.dedup_partition_entries = 100;';
is(count_of('queued', push_ids('capped', map { "k-$_" } 1 .. 150)), 150, '150 ids past the partition cap queued');
$m = dedup_metrics();
is($m->{cache_partitionsuncached}, 1, 'the capped partition is not cached');
my $evictions = $m->{cache_evictions_total};
is(count_of('duplicate', push_ids('capped', map { "k-$_" } 1 .. 10)), 10, "capped: duplicates found (push $_)")
  for 1 .. 3;
is(dedup_metrics()->{cache_evictions_total}, $evictions, 'capped: not cached again and evicted at every push');
$session = '';

# More than 16 subtransactions of one transaction record into a partition:
# it stops being cached, and stays so for the rest of that transaction.
$evictions = dedup_metrics()->{cache_evictions_total};
$node->safe_psql('postgres', q{DO $$
BEGIN
	FOR i IN 1 .. 20 LOOP
		BEGIN
			PERFORM queen.push_text(format(
				'{"items":[{"queue":"over","partition":"sub","transactionId":"s-%s","payload":%s}]}', i, i));
		EXCEPTION WHEN division_by_zero THEN NULL;
		END;
	END LOOP;
END $$});
is(dedup_metrics()->{cache_evictions_total}, $evictions + 1, '20 subtransactions: one eviction, not one per push');
is(count_of('duplicate', push_ids('sub', map { "s-$_" } 1 .. 20)), 20, 'every id of the subtransactions is a duplicate');

# Every place taken (256 with this cache), then the hashes expire: a new
# partition finds a place (expired ones give theirs up) and is cached.
my $body = $json->encode({ items => [ map {
	{ queue => 'over', partition => "q$_", transactionId => 'one', payload => $_ } } 1 .. 300 ] });
$node->safe_psql('postgres', "SELECT queen.push_text(\$b\$$body\$b\$)");
sleep 6;
push_ids('fresh', 'f-1');
$reads = dedup_metrics()->{window_reads_total};
is(count_of('duplicate', push_ids('fresh', 'f-1')), 1, 'a new partition past 300 expired ones: duplicate found');
is(dedup_metrics()->{window_reads_total}, $reads, 'from the cache: it found a place');

# An id stored twice while dedup was off, both copies then inside the
# window: when the first expires and is pruned, the second still counts.
$node->safe_psql('postgres', q{UPDATE queen.queues SET dedup_window_seconds = 0 WHERE name = 'over'});
push_ids('twice', 'x');
sleep 4;
push_ids('twice', 'x');
$node->safe_psql('postgres', q{UPDATE queen.queues SET dedup_window_seconds = 8 WHERE name = 'over'});
is(count_of('queued', push_ids('twice', 'y')), 1, 'the window back on: a fresh id queued');
sleep 5;    # the first x is out of the window, the second is not
is(count_of('queued', push_ids('filler', map { "z-$_" } 1 .. 1100)), 1100, 'the cache filled: expired hashes pruned');
is(count_of('duplicate', push_ids('twice', 'x')), 1, 'the copy still inside the window is found');

$node->stop;
done_testing();
