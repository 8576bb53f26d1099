# Every partition past one hash left out of the shared dedup cache
# (queen_streams.dedup_partition_entries = 1 for the whole server): every
# probe goes by key (queen.log_txn_keys). The verdicts are the table's all
# the same: repeats, a rolled-back push, a prepared push rolled back and
# one committed from another connection, a window lowered and raised, a
# retry of a 20,000-item push, a restart and a crash.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use Test::More;

my $node = qs_node('dedup_keys', "max_prepared_transactions = 2\nqueen_streams.dedup_partition_entries = 1\n");

# statuses of one push of these ids into queue kq, in item order
sub push_ids
{
	my ($node, @ids) = @_;
	my $items = join(',', map { qq({"queue":"kq","transactionId":"$_","payload":0}) } @ids);
	return $node->safe_psql('postgres', qq{SELECT string_agg(e->>'status', ',' ORDER BY (e->>'index')::int)
		FROM jsonb_array_elements(queen.push_text('{"items":[$items]}')::jsonb) e});
}

is(push_ids($node, 'a', 'b'), 'queued,queued', 'fresh ids queued');
is(push_ids($node, 'a', 'c'), 'duplicate,queued', 'a repeat is a duplicate');
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM queen.log_txn_keys'), '>=', 2, 'found by key');

$node->safe_psql('postgres', q{BEGIN;
	SELECT queen.push_text('{"items":[{"queue":"kq","transactionId":"d","payload":0}]}');
	ROLLBACK});
is(push_ids($node, 'd'), 'queued', 'a rolled-back id is queued');

$node->safe_psql('postgres', q{BEGIN;
	SELECT queen.push_text('{"items":[{"queue":"kq","transactionId":"p1","payload":0}]}');
	PREPARE TRANSACTION 'k1'});
$node->safe_psql('postgres', q{ROLLBACK PREPARED 'k1'});
is(push_ids($node, 'p1'), 'queued', 'after ROLLBACK PREPARED from another connection: queued');
$node->safe_psql('postgres', q{BEGIN;
	SELECT queen.push_text('{"items":[{"queue":"kq","transactionId":"p2","payload":0}]}');
	PREPARE TRANSACTION 'k2'});
$node->safe_psql('postgres', q{COMMIT PREPARED 'k2'});
is(push_ids($node, 'p2', 'p1'), 'duplicate,duplicate', 'after COMMIT PREPARED: a duplicate');

$node->safe_psql('postgres', q{UPDATE queen.queues SET dedup_window_seconds = 1 WHERE name = 'kq'});
sleep 2;
is(push_ids($node, 'a'), 'queued', 'past a lowered window: queued again');
$node->safe_psql('postgres', q{UPDATE queen.queues SET dedup_window_seconds = 3600 WHERE name = 'kq'});
is(push_ids($node, 'b', 'a'), 'duplicate,duplicate', 'the window raised again: the old copy counts');

# 20,000 ids in 20 pushes, then all of them again in one push: all duplicates
my @many = map { "m$_" } 1 .. 20000;
for my $k (0 .. 19)
{
	my $st = push_ids($node, @many[ $k * 1000 .. $k * 1000 + 999 ]);
	die "push $k: $st" if $st =~ /duplicate/;
}
my $retry = push_ids($node, @many);
is(scalar(grep { $_ eq 'duplicate' } split /,/, $retry), 20000, 'a 20,000-item retry is all duplicates');

$node->restart;
is(push_ids($node, 'm1', 'c', 'fresh'), 'duplicate,duplicate,queued', 'after a restart: the same verdicts');
$node->stop('immediate');
$node->start;
is(push_ids($node, 'm2', 'fresh', 'fresh2'), 'duplicate,duplicate,queued', 'after a crash: the same verdicts');
is($node->safe_psql('postgres', q{SELECT count(*) FROM queen.log_txn_marks m
	WHERE (SELECT count(*) FROM queen.log_txn_keys k WHERE k.partition_id = m.partition_id AND k.msg_offset <= m.indexed)
	   <> (SELECT coalesce(sum(t.end_offset - t.base_offset + 1), 0) FROM queen.log_txns t
	        WHERE t.partition_id = m.partition_id AND t.base_offset <= m.indexed)}), '0',
	'every hash row up to the mark has its keys');

$node->stop;
done_testing();
