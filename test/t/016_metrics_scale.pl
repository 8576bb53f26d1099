# A scrape of GET /metrics at 100,000 partitions and 100 consumer groups
# (issue 40), each group with a cursor on every partition of its queue: the
# gauges are read from a snapshot the listener refreshes in the background
# (queen_streams.metrics_gauges_interval, here 2 s), so a scrape answers
# within a bound the test states generously (the machine is shared: the
# goal is 200 ms), the numbers equal what SQL computes per partition, and a
# change shows once the snapshot is refreshed, its age a gauge. Half the
# groups are caught up on their queue's oldest partitions (the lag walk's
# worst case), half on the newest. The partitions, segments (one
# 10-message segment each, never decoded), cursors and dead letters are
# made with one statement each.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = qs_node('scale', "shared_buffers = 512MB\nqueen_streams.metrics_gauges_interval = 2\n");
$node->safe_psql('postgres', <<'EOF');
INSERT INTO queen.queues (name) SELECT 'bulk' || i FROM generate_series(1, 100) i;
INSERT INTO queen.log_partitions (queue_id, name, last_offset, log_start, last_write_at, oldest_live_at)
SELECT q.id, 'p' || j, 9, 0, now(), now() - make_interval(secs => j)
  FROM queen.queues q, generate_series(1, 1000) j;
INSERT INTO queen.log_segments (partition_id, base_offset, end_offset, created_at, blob)
SELECT id, 0, 9, oldest_live_at, '\x00' FROM queen.log_partitions;
-- queue mode half way on every partition; group gN on every partition of bulkN,
-- caught up on half of them (odd N: the oldest half, even N: the newest), leasing one
INSERT INTO queen.log_consumers (partition_id, consumer_group, committed)
SELECT id, '__QUEUE_MODE__', 4 FROM queen.log_partitions;
INSERT INTO queen.log_consumers (partition_id, consumer_group, committed, worker_id, lease_expires_at)
SELECT p.id, 'g' || substr(q.name, 5),
       CASE WHEN (substr(p.name, 2)::int > 500) = (substr(q.name, 5)::int % 2 = 1) THEN 9 ELSE 4 END,
       CASE WHEN p.name = 'p1' THEN 'w' END, CASE WHEN p.name = 'p1' THEN now() + interval '1 hour' END
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id;
INSERT INTO queen.log_dlq (partition_id, consumer_group, "offset")
SELECT id, '__QUEUE_MODE__', 0 FROM queen.log_partitions WHERE name = 'p7';
VACUUM ANALYZE queen.log_partitions, queen.log_consumers, queen.log_segments, queen.log_dlq;
EOF
is($node->safe_psql('postgres', 'SELECT count(*) FROM queen.log_partitions'), '100000', '100,000 partitions');
is($node->safe_psql('postgres', 'SELECT count(DISTINCT consumer_group) FROM queen.log_consumers'), '101',
	'100 consumer groups and queue mode');

# the first scrape finds no snapshot: it reads the tables (and publishes what it read)
my ($st, $text) = http($node, 'GET', '/metrics');
is($st, 200, 'a first scrape');
my @ms;
for (1 .. 5)
{
	my $t0 = time;
	($st, $text) = http($node, 'GET', '/metrics');
	push @ms, (time - $t0) * 1000;
	die "GET /metrics: $st" unless $st == 200;
}
my ($median) = (sort { $a <=> $b } @ms)[2];
note(sprintf('scrape at 100,000 partitions: %s ms (median %.0f)', join(', ', map { sprintf '%.0f', $_ } @ms), $median));
# the goal is 200 ms; a shared CI machine gets five times that (reading the tables takes 1-2 s here)
cmp_ok($median, '<', 1000, sprintf('the scrape answers within its bound (median %.0f ms)', $median));
my ($age) = $text =~ /^queen_streams_gauges_age_seconds (\S+)$/m;
ok(defined $age && $age < 60, "the snapshot's age is a gauge (" . ($age // 'none') . ' s)');

my %backlog;
$backlog{"$1/$2"} = $3
  while $text =~ /^queen_streams_consumer_group_backlog_messages\{tenant="[^"]*",queue="([^"]*)",consumer_group="([^"]*)"\} (\d+)$/mg;
is(scalar(keys %backlog), 200, 'one series per queue and group');
is($backlog{'bulk7/__QUEUE_MODE__'}, 5000, 'queue mode: five of ten left on each of 1000 partitions');
is($backlog{'bulk7/g7'}, 2500, 'g7: five left on the 500 partitions it has not caught up on');
is($backlog{'bulk8/g8'}, 2500, 'g8 too');
like($text, qr/^queen_streams_consumer_group_dead_letters\{[^}]*queue="bulk7",consumer_group="__QUEUE_MODE__"\} 1$/m,
	'one dead letter');
like($text, qr/^queen_streams_consumer_group_leased_partitions\{[^}]*queue="bulk7",consumer_group="g7"\} 1$/m,
	'one leased partition');
# the oldest unacked message of g7 is on p500 (caught up on p501..p1000), of g8 on p1000;
# the snapshot may be up to its age older than SQL's now
for my $g (7, 8)
{
	my ($lag) = $text =~ /^queen_streams_consumer_group_lag_seconds\{[^}]*queue="bulk$g",consumer_group="g$g"\} (\S+)$/m;
	my $want = $node->safe_psql('postgres', <<"EOF");
SELECT extract(epoch FROM now() - min(s.created_at))
  FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id
  JOIN queen.queues q ON q.id = p.queue_id
  JOIN queen.log_segments s ON s.partition_id = p.id AND s.base_offset <= c.committed + 1 AND s.end_offset > c.committed
 WHERE q.name = 'bulk$g' AND c.consumer_group = 'g$g' AND c.committed < p.last_offset
EOF
	ok(defined $lag && $lag <= $want && $lag > $want - 60, "g${g}'s lag is its oldest unacked message's age ($lag, SQL $want)");
}

# g7 acks everything: the scrapes show the old backlog until the snapshot is
# refreshed (every 2 s while scraped), then the new one, never a mix
$node->safe_psql('postgres', <<'EOF');
UPDATE queen.log_consumers c SET committed = 9 FROM queen.log_partitions p, queen.queues q
 WHERE p.id = c.partition_id AND q.id = p.queue_id AND q.name = 'bulk7' AND c.consumer_group = 'g7'
EOF
my ($b7, $parts7, $seen_old) = (undef, undef, 0);
my $deadline = time + 60;
while (time < $deadline)
{
	($st, $text) = http($node, 'GET', '/metrics');
	($b7) = $text =~ /^queen_streams_consumer_group_backlog_messages\{[^}]*queue="bulk7",consumer_group="g7"\} (\d+)$/m;
	($parts7) = $text =~ /^queen_streams_consumer_group_partitions_with_backlog\{[^}]*queue="bulk7",consumer_group="g7"\} (\d+)$/m;
	die "a scrape mixes snapshots: backlog $b7 on $parts7 partitions" unless ($b7 == 0) == ($parts7 == 0);
	last if $b7 == 0;
	$seen_old++;
	usleep(200_000);
}
is($b7, 0, "g7's acks show once the snapshot is refreshed (after $seen_old scrapes of the old one)");
($age) = $text =~ /^queen_streams_gauges_age_seconds (\S+)$/m;
ok($age < 30, "and the snapshot is fresh ($age s)");

done_testing();
