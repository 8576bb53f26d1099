# Rolled-back pushes and the shared dedup cache. The backend that rolls a
# push back settles its hashes itself, so no later probe passes over the
# whole cache (under its lock, stalling every push of the server) to purge
# them: /metrics counts those passes by reason. A prepared transaction
# rolled back from another session still goes the old way. And a
# rolled-back copy of an id whose original had left a lowered window keeps
# the cache's knowledge of that original, through a raised window and
# through pruning.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use JSON::PP;
use QsHttp;
use Test::More;

my $node = qs_node('dedup_rollbacks',
	"queen_streams.dedup_cache_entries = 1024\nmax_prepared_transactions = 4\n");
my $json = JSON::PP->new;

sub push_sql
{
	my ($part, @ids) = @_;
	my $body = $json->encode({ items => [ map {
		{ queue => 'rb', partition => $part, transactionId => $_, payload => { id => $_ } } } @ids ] });
	return "SELECT queen.push_text(\$b\$$body\$b\$);";
}

sub push_ids
{
	my $out = $node->safe_psql('postgres', push_sql(@_));
	return map { $_->{status} } @{ $json->decode($out) };
}

sub count_of { my ($want, @st) = @_; return scalar grep { $_ eq $want } @st; }

sub set_window
{
	$node->safe_psql('postgres', "UPDATE queen.queues SET dedup_window_seconds = $_[0] WHERE name = 'rb'");
}

# Each id pushed in a prepared transaction, rolled back from another session.
sub roll_back_prepared
{
	my ($part, @ids) = @_;
	for my $id (@ids)
	{
		$node->safe_psql('postgres', 'BEGIN; ' . push_sql($part, $id) . " PREPARE TRANSACTION 'rb_$id';");
		$node->safe_psql('postgres', "ROLLBACK PREPARED 'rb_$id'");
	}
}

# Passes over the whole cache for one reason (room, drop, purge).
sub scans
{
	my ($reason) = @_;
	my ($status, $body) = http($node, 'GET', '/metrics');
	die "GET /metrics: $status" unless $status == 200;
	$body =~ /^queen_streams_dedup_cache_scans_total\{reason="$reason"\} (\d+)$/m
	  or die "no scans counter for $reason";
	return $1;
}

$node->safe_psql('postgres',
	q{SELECT queen.configure('{"queue":"rb","options":{"dedupWindowSeconds":3600}}')});
# First, in the empty cache: a transaction that tags more entries than the
# cache holds is not followed to its end. Rolled back, its ids are left to
# the probes, which find them aborted all the same, also those it stored in
# a partition it had tagged before (big-d stops being cached, big-c stays).
is(count_of('queued', push_ids('big-c', 'bc-0')), 1, 'big-c exists');
$node->safe_psql('postgres', join "\n", 'BEGIN;', push_sql('big-c', map { "bc-$_" } 1 .. 10),
	push_sql('big-d', map { "bd-$_" } 1 .. 700), push_sql('big-e', map { "be-$_" } 1 .. 400),
	push_sql('big-c', map { "bc-late-$_" } 1 .. 5), 'ROLLBACK;');
is(count_of('queued', push_ids('big-c', (map { "bc-$_" } 1 .. 10), map { "bc-late-$_" } 1 .. 5)), 15,
	'too large to follow: rolled back, queued afterwards');
is(count_of('queued', push_ids('big-e', map { "be-$_" } 1 .. 400)), 400, 'in every partition');
is(count_of('duplicate', push_ids('big-c', 'bc-0', 'bc-1', 'bc-late-5')), 3, 'and duplicates once stored');

is(count_of('queued', push_ids('p', map { "kept-$_" } 1 .. 10)), 10, 'ten ids stored');
my $purges = scans('purge');
my $drops = scans('drop');

# Forty rollbacks each way, all into one partition (the old way purged the
# cache every sixteenth).
$node->safe_psql('postgres', join "\n", map { 'BEGIN; ' . push_sql('p', "a-$_") . ' ROLLBACK;' } 1 .. 40);
$node->safe_psql('postgres', join "\n", 'BEGIN;', push_sql('p', 'before-them'),
	(map { "SAVEPOINT s; " . push_sql('p', "s-$_") . ' ROLLBACK TO SAVEPOINT s;' } 1 .. 40),
	push_sql('p', 'committed-with-them'), 'COMMIT;');
$node->safe_psql('postgres', q{DO $$
BEGIN
	FOR i IN 1 .. 40 LOOP
		BEGIN
			PERFORM queen.push_text(format(
				'{"items":[{"queue":"rb","partition":"p","transactionId":"x-%s","payload":%s}]}', i, i));
			RAISE division_by_zero;
		EXCEPTION WHEN division_by_zero THEN NULL;
		END;
	END LOOP;
END $$});
# Nested: an inner savepoint released into one that is rolled back.
$node->safe_psql('postgres', join "\n", 'BEGIN;', 'SAVEPOINT outer_sp;', 'SAVEPOINT inner_sp;',
	push_sql('p', 'n-1'), 'RELEASE SAVEPOINT inner_sp;', push_sql('p', 'n-2'),
	'ROLLBACK TO SAVEPOINT outer_sp;', push_sql('p', 'n-3'), 'COMMIT;');
is(scans('purge'), $purges, '160 rolled-back pushes: no purge of the cache');
is(scans('drop'), $drops, 'nor a partition dropped');

my @st = push_ids('p', (map { "a-$_" } 1 .. 40), (map { "s-$_" } 1 .. 40), (map { "x-$_" } 1 .. 40),
	'n-1', 'n-2');
is(count_of('queued', @st), 122, 'every rolled-back id is queued afterwards');
@st = push_ids('p', (map { "kept-$_" } 1 .. 10), 'before-them', 'committed-with-them', 'n-3', 'a-1',
	'x-40', 'n-2');
is(count_of('duplicate', @st), 16, 'the committed ids, and the ones just queued, are duplicates');
is(scans('purge'), $purges, 'still no purge');

# One session whose first push is too large to follow: its later
# transactions are followed again.
$node->safe_psql('postgres', join "\n", 'BEGIN;', push_sql('huge', map { "h-$_" } 1 .. 1100), 'ROLLBACK;',
	map { 'BEGIN; ' . push_sql('p', "after-huge-$_") . ' ROLLBACK;' } 1 .. 20);
is(scans('purge'), $purges, 'after a transaction too large to follow, 20 rollbacks: no purge');
is(count_of('queued', push_ids('p', map { "after-huge-$_" } 1 .. 20)), 20, 'and their ids are queued afterwards');

# Prepared transactions rolled back: the backend that prepared them cannot
# settle them, the next probes do, and purge every sixteenth with a pass.
roll_back_prepared('p', map { "prep-$_" } 1 .. 17);
push_ids('p', 'after-prepared');
is(scans('purge'), $purges + 1, 'seventeen rolled-back prepared transactions: one purge');
is(count_of('queued', push_ids('p', map { "prep-$_" } 1 .. 17)), 17, 'and their ids are queued afterwards');
is(count_of('duplicate', push_ids('p', 'kept-1', 'prep-1', 'after-prepared')), 3, 'the cache still answers right');

# An original that left a lowered window, a rolled-back copy of it, the
# window raised again: the original is back inside it, and a duplicate,
# both before and after the cache is filled and pruned.
# (another id keeps the partition in the cache when it is pruned)
is(count_of('queued', push_ids('o', 'orig', 'other')), 2, 'the original stored');
set_window(1);
sleep 2;
$node->safe_psql('postgres', 'BEGIN; ' . push_sql('o', 'orig') . ' ROLLBACK;');
set_window(3600);
is(count_of('duplicate', push_ids('o', 'orig')), 1, 'raised window: the original is a duplicate again');
my $rooms = scans('room');
is(count_of('queued', push_ids('filler', map { "f-$_" } 1 .. 1100)), 1100, 'the cache filled');
cmp_ok(scans('room'), '>', $rooms, 'and made room');
is(count_of('duplicate', push_ids('o', 'orig')), 1, 'after pruning, still a duplicate');

# The same with a prepared copy, purged while the raised window holds the
# original: the purge keeps what the copy knew of it.
is(count_of('queued', push_ids('o2', 'orig', 'other')), 2, 'a second original stored');
set_window(1);
sleep 2;
roll_back_prepared('o2', 'orig');
set_window(3600);
is(count_of('duplicate', push_ids('o2', 'orig')), 1, 'raised window: the second original is a duplicate');
$purges = scans('purge');
roll_back_prepared('o2', map { "prep-$_" } 1 .. 17);
push_ids('o2', 'after-prepared');
is(scans('purge'), $purges + 1, 'purged');
is(count_of('duplicate', push_ids('o2', 'orig')), 1, 'after the purge, still a duplicate');

$node->stop;
done_testing();
