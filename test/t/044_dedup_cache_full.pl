# The shared dedup cache at its smallest (1024 hashes) answers exactly as
# reading the window would, however often it fills: expired and rolled-back
# hashes are pruned (their index slots shift back), the partition holding
# the most stops being cached and is probed from the table, and every
# verdict stays the table's. Each push is checked against what the test
# itself knows was stored and is still inside its window.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use JSON::PP;
use QsHttp;
use Test::More;

my $node = qs_node('dedup_full', "queen_streams.dedup_cache_entries = 1024\n");
my $json = JSON::PP->new;

# Push ids (queue, partition, ids...) in one request; returns the statuses
# and the message ids, by id.
sub push_ids
{
	my ($queue, $part, @ids) = @_;
	my $body = $json->encode({ items => [ map {
		{ queue => $queue, partition => $part, transactionId => $_, payload => { id => $_ } } } @ids ] });
	$body =~ s/'/''/g;
	my $out = $node->safe_psql('postgres', "SELECT queen.push_text('$body')");
	my %r;
	$r{ $_->{transaction_id} } = [ $_->{status}, $_->{message_id} ] for @{ $json->decode($out) };
	return \%r;
}

my %orig;    # "queue/part/id" => the original's message id, for ids inside their window
my $bad = 0;

# Push and check every verdict against %orig.
sub check
{
	my ($what, $queue, $part, @ids) = @_;
	my $r = push_ids($queue, $part, @ids);
	my $wrong = 0;
	for my $id (@ids)
	{
		my ($status, $mid) = @{ $r->{$id} };
		my $k = "$queue/$part/$id";
		if (exists $orig{$k})
		{
			$wrong++ unless $status eq 'duplicate' && $mid eq $orig{$k};
		}
		else
		{
			$wrong++ unless $status eq 'queued';
			$orig{$k} = $mid;
		}
	}
	$bad += $wrong;
	return $wrong;
}

$node->safe_psql('postgres', q{
	SELECT queen.push('{"items":[{"queue":"full","payload":0},{"queue":"brief","payload":0}]}');
	UPDATE queen.queues SET dedup_window_seconds = 2 WHERE name = 'brief'});

# Four partitions of 300 ids each: 1,200 hashes overflow the cache.
for my $p (0 .. 3)
{
	is(check("fill p$p", 'full', "p$p", map { "f$p-$_" } 1 .. 300), 0, "fill p$p: all queued");
}
# Every id again, mixed with fresh ones: the old ones are duplicates of
# their originals, wherever the cache put (or dropped) them.
for my $p (0 .. 3)
{
	is(check("retry p$p", 'full', "p$p", (map { "f$p-$_" } 1 .. 300), (map { "g$p-$_" } 1 .. 50)), 0,
		"retry p$p: duplicates name their originals, fresh ids are queued");
}

# A rolled-back push leaves nothing that counts: its ids are queued next time.
$node->safe_psql('postgres', q{BEGIN;
	SELECT queen.push_text((SELECT json_build_object('items', json_agg(json_build_object(
	  'queue', 'full', 'partition', 'p9', 'transactionId', 'r-' || i, 'payload', i)))::text
	  FROM generate_series(1, 400) i));
	ROLLBACK;});
is(check('after rollback', 'full', 'p9', map { "r-$_" } 1 .. 400), 0, 'a rolled-back push leaves no duplicate');

# Hashes that leave their window are pruned when the cache fills again,
# and no longer count; the others still do.
is(check('brief', 'brief', 'b', map { "b-$_" } 1 .. 500), 0, 'brief window filled');
sleep 3;
delete $orig{$_} for grep { m{^brief/} } keys %orig;
is(check('refill', 'full', 'p5', map { "h-$_" } 1 .. 700), 0, 'a new partition pushes past a full cache');
is(check('brief again', 'brief', 'b', map { "b-$_" } 1 .. 500), 0, 'ids past their window are queued again');
for my $p (0 .. 3, 5, 9)
{
	my @ids = grep { m{^full/p$p/} } keys %orig;
	s{^full/p$p/}{} for @ids;
	is(check("final p$p", 'full', "p$p", sort @ids), 0, "p$p: every stored id is still a duplicate");
}
is($bad, 0, 'no verdict differs from the table');

$node->stop;
done_testing();
