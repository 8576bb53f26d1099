# The shared dedup cache at its smallest (1024 hashes, places for 256
# partitions) answers exactly as reading the window would, however often
# it fills: expired and rolled-back hashes are pruned (their index slots
# shift back), partitions left with nothing cached give up their place,
# the partition holding the most stops being cached and is probed from the
# table, and every verdict stays the table's. Each push is checked against
# what the test itself knows was stored and is still inside its window.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use JSON::PP;
use QsHttp;
use Test::More;

my $node = qs_node('dedup_full', "queen_streams.dedup_cache_entries = 1024\n");
my $json = JSON::PP->new;

my %orig;    # "queue/partition/id" => the original's message id, while inside its window
my $bad = 0;

# Push [partition, id] pairs of one queue in one request and check every
# verdict against %orig: the number of wrong ones.
sub check
{
	my ($queue, @pairs) = @_;
	my $body = $json->encode({ items => [ map {
		{ queue => $queue, partition => $_->[0], transactionId => $_->[1], payload => { id => $_->[1] } } } @pairs ] });
	my $out = $node->safe_psql('postgres', "SELECT queen.push_text(\$b\$$body\$b\$)");
	my @res = @{ $json->decode($out) };
	my $wrong = 0;
	for my $i (0 .. $#pairs)
	{
		my ($part, $id) = @{ $pairs[$i] };
		my ($status, $mid) = @{ $res[$i] }{qw(status message_id)};
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

sub ids { my ($part, $prefix, $from, $to) = @_; return map { [ $part, "$prefix$_" ] } $from .. $to; }

$node->safe_psql('postgres', q{
	SELECT queen.push('{"items":[{"queue":"full","payload":0},{"queue":"brief","payload":0}]}');
	UPDATE queen.queues SET dedup_window_seconds = 2 WHERE name = 'brief'});

# Four partitions of 300 ids each: 1,200 hashes overflow the cache.
is(check('full', ids("p$_", "f$_-", 1, 300)), 0, "fill p$_: all queued") for 0 .. 3;
# Every id again, mixed with fresh ones: the old ones are duplicates of
# their originals, wherever the cache put (or dropped) them.
is(check('full', ids("p$_", "f$_-", 1, 300), ids("p$_", "g$_-", 1, 50)), 0,
	"retry p$_: duplicates name their originals, fresh ids are queued") for 0 .. 3;

# A rolled-back push leaves nothing that counts: its ids are queued next time.
$node->safe_psql('postgres', q{BEGIN;
	SELECT queen.push_text((SELECT json_build_object('items', json_agg(json_build_object(
	  'queue', 'full', 'partition', 'p9', 'transactionId', 'r-' || i, 'payload', i)))::text
	  FROM generate_series(1, 400) i));
	ROLLBACK;});
is(check('full', ids('p9', 'r-', 1, 400)), 0, 'a rolled-back push leaves no duplicate');

# Hashes that leave their window are pruned when the cache fills again,
# and no longer count; the others still do. The 300 partitions of the
# short window, left with nothing cached, give their places to new ones.
is(check('brief', ids('b', 'b-', 1, 300), map { [ "bm$_", "one" ] } 1 .. 300), 0, 'short window filled, 301 partitions');
sleep 3;
delete $orig{$_} for grep { m{^brief/} } keys %orig;
is(check('full', ids('p5', 'h-', 1, 700)), 0, 'a new partition pushes past a full cache');
is(check('full', map { [ "m$_", "one" ] } 1 .. 300), 0, '300 new partitions past the partitions the cache places');
is(check('brief', ids('b', 'b-', 1, 300), map { [ "bm$_", "one" ] } 1 .. 300), 0, 'ids past their window are queued again');
is(check('full', map { [ "m$_", "one" ] } 1 .. 300), 0, 'the new partitions answer duplicates');

my %by;
for (keys %orig)
{
	my ($q, $part, $id) = split m{/}, $_, 3;
	push @{ $by{$q} }, [ $part, $id ];
}
is(check($_, sort { $a->[0] cmp $b->[0] || $a->[1] cmp $b->[1] } @{ $by{$_} }), 0,
	"every id stored in $_ within its window is still a duplicate") for sort keys %by;
is($bad, 0, 'no verdict differs from the table');

$node->stop;
done_testing();
