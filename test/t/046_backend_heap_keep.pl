# queen_streams.backend_heap_keep is how much freed heap a stream worker
# keeps, set once at its start; mallopt is process-wide, so an ordinary
# session that calls queen functions is left as glibc sets it: the same
# large pops grow its data segment (VmData) the same at the default and at
# 0. (Before, every SPI entry called mallopt in the session, and at 0 it
# gave back what it kept at 8 MB.) The HTTP and stream workers are ours:
# their settings are read from the workers' processes.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use Test::More;

my $node = qs_node('heap_keep');

is($node->safe_psql('postgres', 'SHOW queen_streams.backend_heap_keep'), '8MB', 'the default is 8 MB');
is($node->safe_psql('postgres', "SELECT context FROM pg_settings WHERE name = 'queen_streams.backend_heap_keep'"),
	'postmaster', 'read once, when a stream worker starts');

# 40,000 messages of about 200 bytes in 400 segments of one partition.
$node->safe_psql('postgres', q{
	SELECT queen.push_text((SELECT json_build_object('items', json_agg(json_build_object(
		'queue', 'heap', 'payload', json_build_object('n', i, 'pad', repeat('x', 180)))))::text
	  FROM generate_series(1, 100) i))
	  FROM generate_series(1, 400)});

# VmData (kB) of a fresh backend before and after popping the lot twice
# (the second pop reads the same messages again: consumer groups).
sub kept
{
	my ($g) = @_;
	my $out = $node->safe_psql('postgres', qq{
		SET queen_streams.max_pop_batch = 40000;	-- the whole backlog in one pop
		CREATE TEMP TABLE vm (k int, kb bigint);
		INSERT INTO vm SELECT 0, substring(pg_read_file('/proc/self/status') FROM 'VmData:\\s+(\\d+)')::bigint;
		SELECT count(*) FROM queen.pop_text('heap', NULL, '${g}1', 40000, NULL, true);
		SELECT count(*) FROM queen.pop_text('heap', NULL, '${g}2', 40000, NULL, true);
		INSERT INTO vm SELECT 1, substring(pg_read_file('/proc/self/status') FROM 'VmData:\\s+(\\d+)')::bigint;
		SELECT max(kb) FILTER (WHERE k = 1) - max(kb) FILTER (WHERE k = 0) FROM vm});
	my @lines = split /\n/, $out;
	return $lines[-1];
}

my $with = kept('a');
$node->safe_psql('postgres', 'ALTER SYSTEM SET queen_streams.backend_heap_keep = 0');
$node->restart;
my $without = kept('b');
note("a session's data segment grown by the pops: $with kB at 8 MB, $without kB at 0");
cmp_ok(abs($with - $without), '<', 1024, 'the setting does not touch an ordinary session (the same within 1 MB at 8 MB and at 0)');

$node->stop;
done_testing();
