# The listener's retention sweep holds one partition's row lock at a time
# (issue 13, point 10): with the sweep stuck behind a lock on one expired
# partition, the partition it swept before is already committed and free,
# so a push to it goes through.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = qs_node('retention', "queen_streams.retention_interval = 0\n");

my ($st) = http_json($node, 'POST', '/api/v1/configure',
	{ queue => 'rq', options => { retentionEnabled => JSON::PP::true, retentionSeconds => 1 } });
is($st, 200, 'configure retention');
($st) = http_json($node, 'POST', '/api/v1/push',
	{ items => [ map { { queue => 'rq', partition => "p$_", payload => $_ } } 1 .. 2 ] });
is($st, 201, 'push to two partitions');
my ($first, $second) = split /\n/, $node->safe_psql('postgres',
	q{SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
	   WHERE q.name = 'rq' AND p.name <> 'Default' ORDER BY p.id});
my ($first_name) = $node->safe_psql('postgres', "SELECT name FROM queen.log_partitions WHERE id = '$first'");
sleep 2;    # both segments are now past retention

# Hold the second partition's row: the sweep (ascending id) does the first, then waits.
my $locker = $node->background_psql('postgres');
$locker->query_safe("BEGIN; SELECT 1 FROM queen.log_partitions WHERE id = '$second' FOR UPDATE;");
$node->append_conf('postgresql.conf', "queen_streams.retention_interval = 1\n");
$node->reload;

my $swept = 0;
for (1 .. 100)
{
	$swept = $node->safe_psql('postgres', "SELECT log_start > 0 FROM queen.log_partitions WHERE id = '$first'") eq 't';
	last if $swept;
	usleep(100_000);
}
ok($swept, 'the first partition was swept');
ok($node->poll_query_until('postgres',
	q{SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%retention%'}),
	'the sweep waits on the second partition');

# The first partition's row is not held by the waiting sweep.
my ($ret, $out, $err) = $node->psql('postgres',
	"SET lock_timeout = '3s'; SELECT queen.push('{\"items\":[{\"queue\":\"rq\",\"partition\":\"$first_name\",\"payload\":3}]}') IS NOT NULL");
is($ret, 0, 'a push to the swept partition goes through while the sweep waits') or diag $err;

$locker->query_safe('COMMIT');
$locker->quit;
ok($node->poll_query_until('postgres', "SELECT log_start > 0 FROM queen.log_partitions WHERE id = '$second'"),
	'the second partition is swept once released');

$node->stop;
done_testing();
