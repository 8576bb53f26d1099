# queen_streams.backend_heap_keep: a backend that ran a large pop keeps
# the heap it freed (up to the setting) instead of giving it back to the
# system at the end of the call, and gives it back with the setting at 0
# (reloaded, taking effect at the next call). Measured on the backend's own
# data segment (VmData), the same calls in a fresh session each time.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use Test::More;

my $node = qs_node('heap_keep');

is($node->safe_psql('postgres', 'SHOW queen_streams.backend_heap_keep'), '8MB', 'the default is 8 MB');

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
$node->safe_psql('postgres', q{
	ALTER SYSTEM SET queen_streams.backend_heap_keep = 0;
	SELECT pg_reload_conf()});
my $without = kept('b');
note("data segment grown by the pops: $with kB kept at 8 MB, $without kB at 0");
cmp_ok($with - $without, '>=', 1024, 'at 8 MB the backend keeps at least 1 MB more of the heap its pops freed than at 0');

$node->stop;
done_testing();
