# The consumer-group routes over HTTP, called as Queen's JS Admin client
# calls them: list, lagging?minLagSeconds=, details, delete (whole group and
# one queue, ?deleteMetadata=), subscription update, seek to the end or a
# timestamp, partition seek. Status codes, shapes, errors, SQL and HTTP
# bodies alike, and where a pop resumes afterwards.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = qs_node('groups');
my $time_re = qr/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

sub keys_of { return [ sort keys %{ $_[0] } ]; }

sub pop_txns
{
	my ($q, $part, $grp, $extra) = @_;
	my ($s, $d) = http_json($node, 'GET',
		"/api/v1/pop/queue/$q/partition/$part?batch=10&consumerGroup=$grp" . ($extra // ''));
	return ($s, join(',', map { $_->{transactionId} } @{ $d->{messages} // [] }), $d);
}

my ($st, $doc, $txns, $pop);

# ---- two segments on p1 (00:00 and 01:00), one on p2; a group consumes some
($st) = http_json($node, 'POST', '/api/v1/push', { items => [
	map { { queue => 'hq', partition => 'p1', transactionId => "a$_", payload => $_ } } 0 .. 2 ] });
is($st, 201, 'push answers 201');
http_json($node, 'POST', '/api/v1/push', { items => [
	map { { queue => 'hq', partition => 'p1', transactionId => "b$_", payload => $_ } } 0 .. 1 ] });
http_json($node, 'POST', '/api/v1/push', { items => [
	{ queue => 'hq', partition => 'p2', transactionId => 'c0', payload => 0 } ] });
$node->safe_psql('postgres', q{
	UPDATE queen.log_segments SET created_at = CASE base_offset WHEN 0 THEN timestamptz '2020-01-01 00:00Z'
	                                                             ELSE timestamptz '2020-01-01 01:00Z' END});

($st, $txns, $pop) = pop_txns('hq', 'p1', 'g1');
is_deeply([ $st, $txns ], [ 200, 'a0,a1,a2,b0,b1' ], 'g1 pops p1');
http_json($node, 'POST', '/api/v1/ack', { transactionId => 'a2', partitionId => $pop->{partitionId},
	status => 'completed', error => undef, consumerGroup => 'g1', leaseId => $pop->{leaseId} });
($st, $txns) = pop_txns('hq', 'p2', 'g1', '&autoAck=true');
is($txns, 'c0', 'g1 drains p2');

# ---- GET /api/v1/consumer-groups
($st, $doc) = http_json($node, 'GET', '/api/v1/consumer-groups');
is($st, 200, 'list answers 200');
is(ref $doc, 'ARRAY', 'list is an array');
my ($g1) = grep { $_->{name} eq 'g1' } @$doc;
is_deeply(keys_of($g1), [ qw(maxTimeLag members name partitionsWithLag queueName state
	subscriptionCreatedAt subscriptionMode subscriptionTimestamp topics totalLag) ], 'list entry keys');
is_deeply([ @$g1{qw(queueName members partitionsWithLag totalLag state subscriptionMode)}, $g1->{topics} ],
	[ 'hq', 2, 1, 2, 'Lagging', 'all', [ 'hq' ] ], 'g1 on hq: two members, lag 2 on one partition');
like($g1->{subscriptionCreatedAt}, $time_re, 'subscriptionCreatedAt in milliseconds');
cmp_ok($g1->{maxTimeLag}, '>', 300, 'maxTimeLag counts from the oldest unconsumed message');
is_deeply($doc, json_sql($node, 'queen.consumer_groups()'), 'list: SQL and HTTP give the same body')
  or diag explain $doc;

# ---- GET /api/v1/consumer-groups/lagging
($st, $doc) = http_json($node, 'GET', '/api/v1/consumer-groups/lagging?minLagSeconds=60');
is($st, 200, 'lagging answers 200');
is(scalar @$doc, 1, 'one lagging partition');
is_deeply(keys_of($doc->[0]), [ qw(consumer_group lag_hours last_consumed_at offset_lag
	oldest_unconsumed_at partition_id partition_name queue_name time_lag_seconds worker_id) ],
	'lagging keys are snake_case');
is_deeply([ @{ $doc->[0] }{qw(consumer_group queue_name partition_name offset_lag oldest_unconsumed_at)} ],
	[ 'g1', 'hq', 'p1', 2, '2020-01-01T01:00:00.000Z' ], 'g1 lags on p1 from b0');
is($doc->[0]{worker_id}, $pop->{leaseId}, 'worker_id is the lease id');
($st, $doc) = http_json($node, 'GET', '/api/v1/consumer-groups/lagging?minLagSeconds=2000000000');
is_deeply([ $st, $doc ], [ 200, [] ], 'nothing lags that long');
($st, $doc) = http_json($node, 'GET', '/api/v1/consumer-groups/lagging');
is(scalar @$doc, 1, 'the default minimum is an hour');
($st, $doc) = http_json($node, 'GET', '/api/v1/consumer-groups/lagging?minLagSeconds=abc');
is($st, 400, 'a non-integer minLagSeconds: 400');

# ---- GET /api/v1/consumer-groups/:group
($st, $doc) = http_json($node, 'GET', '/api/v1/consumer-groups/g1');
is($st, 200, 'details answer 200');
is_deeply([ sort keys %$doc ], [ 'hq' ], 'keyed by queue name');
my @parts = @{ $doc->{hq}{partitions} };
is_deeply(keys_of($parts[0]), [ qw(lastConsumedAt leaseActive offsetLag partition timeLagSeconds
	totalConsumed workerId) ], 'partition keys');
is_deeply([ map { [ @$_{qw(partition offsetLag totalConsumed lastConsumedAt)} ] } @parts ],
	[ [ 'p1', 2, 3, '2020-01-01T00:00:00.000Z' ], [ 'p2', 0, 1, '2020-01-01T00:00:00.000Z' ] ],
	'offset lag, consumed count and the last consumed message time per partition');
ok($parts[0]{leaseActive}, 'p1 is leased');
is_deeply($doc, json_sql($node, q{queen.consumer_group('g1')}), 'details: SQL and HTTP give the same body');
($st, $doc) = http_json($node, 'GET', '/api/v1/consumer-groups/nobody');
is_deeply([ $st, $doc ], [ 200, {} ], 'an unknown group: {} with 200');

# ---- POST /api/v1/consumer-groups/:group/subscription
($st, $doc) = http_json($node, 'POST', '/api/v1/consumer-groups/g1/subscription', {});
is_deeply([ $st, $doc->{error} ], [ 400, 'missing subscriptionTimestamp in request body' ],
	'subscription without a timestamp: 400');
($st, $doc) = http_json($node, 'POST', '/api/v1/consumer-groups/g1/subscription',
	{ subscriptionTimestamp => 'not a time' });
is($st, 400, 'an unparsable timestamp: 400');
($st, $doc) = http_json($node, 'POST', '/api/v1/consumer-groups/g1/subscription',
	{ subscriptionTimestamp => '2020-01-01T00:30:00.000Z' });
is_deeply([ $st, $doc ], [ 200, { success => JSON::PP::true, consumerGroup => 'g1',
	newTimestamp => '2020-01-01T00:30:00.000Z', rowsUpdated => 0 } ], 'an all-mode group: rowsUpdated 0');
($st, $txns) = pop_txns('hq', 'p2', 'g2', '&subscriptionFrom=' . '2020-01-01T00%3A00%3A00Z&autoAck=true');
($st, $doc) = http_json($node, 'POST', '/api/v1/consumer-groups/g2/subscription',
	{ subscriptionTimestamp => '2020-01-01T00:30:00.000Z' });
is($doc->{rowsUpdated}, 1, 'a timestamp-mode group: rowsUpdated 1');

# ---- POST /api/v1/consumer-groups/:group/queues/:queue/seek
($st, $doc) = http_json($node, 'POST', '/api/v1/consumer-groups/g1/queues/hq/seek', {});
is_deeply([ $st, $doc->{error} ], [ 400, "must specify either 'toEnd': true or 'timestamp'" ],
	'seek without a target: 400');
($st, $doc) = http_json($node, 'POST', '/api/v1/consumer-groups/g1/queues/nowhere/seek', { toEnd => JSON::PP::true });
is_deeply([ $st, $doc->{error} ], [ 404, 'queue not found' ], 'seek on an unknown queue: 404');
($st, $doc) = http_json($node, 'POST', '/api/v1/consumer-groups/g1/queues/hq/seek', { toEnd => JSON::PP::true });
is_deeply([ $st, $doc ], [ 200, { success => JSON::PP::true, consumerGroup => 'g1', queueName => 'hq',
	seekToEnd => JSON::PP::true, targetTimestamp => undef, partitionsUpdated => 2 } ], 'seek to the end');
($st, $doc) = http_json($node, 'POST', '/api/v1/ack', { transactionId => 'b1', partitionId => $pop->{partitionId},
	status => 'completed', error => undef, consumerGroup => 'g1', leaseId => $pop->{leaseId} });
is_deeply([ $st, $doc->[0]{success}, $doc->[0]{error} ], [ 200, JSON::PP::false, 'invalid or expired lease' ],
	'the seek released the lease: the old lease id no longer acks');
($st, $txns) = pop_txns('hq', 'p1', 'g1');
is($st, 204, 'nothing after the end');
($st, $doc) = http_json($node, 'POST', '/api/v1/consumer-groups/g1/queues/hq/seek',
	{ timestamp => '2020-01-01T00:30:00.000Z' });
is_deeply([ $st, $doc->{targetTimestamp}, $doc->{partitionsUpdated}, $doc->{seekToEnd} ],
	[ 200, '2020-01-01T00:30:00.000Z', 2, JSON::PP::false ], 'seek to a timestamp');
($st, $txns) = pop_txns('hq', 'p1', 'g1', '&autoAck=true');
is($txns, 'b0,b1', 'the pop resumes after the last message at or before the timestamp');

# ---- POST .../queues/:queue/partitions/:partition/seek (the JS client sends no body)
($st, $doc) = http_json($node, 'POST', '/api/v1/consumer-groups/g1/queues/hq/partitions/p9/seek');
is_deeply([ $st, $doc->{error} ], [ 404, 'partition not found' ], 'an unknown partition: 404');
http_json($node, 'POST', '/api/v1/consumer-groups/g1/queues/hq/seek', { timestamp => '2019-01-01T00:00:00Z' });
($st, $doc) = http_json($node, 'POST', '/api/v1/consumer-groups/g1/queues/hq/partitions/p1/seek');
is_deeply([ $st, $doc ], [ 200, { success => JSON::PP::true, consumerGroup => 'g1', queueName => 'hq',
	partitionName => 'p1', updated => JSON::PP::true, cursorMovedTo => 4 } ], 'partition seek to its end');
($st, $txns) = pop_txns('hq', 'p2', 'g1', '&autoAck=true');
is($txns, 'c0', 'the other partition kept its rewind');

# ---- DELETE /api/v1/consumer-groups/:group/queues/:queue and /:group
($st, $doc) = http_json($node, 'DELETE', '/api/v1/consumer-groups/g1/queues/nowhere');
is($st, 404, 'delete on an unknown queue: 404');
($st, $doc) = http_json($node, 'DELETE', '/api/v1/consumer-groups/g2/queues/hq?deleteMetadata=false');
is_deeply([ $st, $doc ], [ 200, { success => JSON::PP::true, consumerGroup => 'g2', queueName => 'hq',
	deletedPartitions => 1, metadataDeleted => JSON::PP::false } ], 'delete one queue, keep the subscription');
($st, $doc) = http_json($node, 'DELETE', '/api/v1/consumer-groups/g1?deleteMetadata=true');
is_deeply([ $st, $doc ], [ 200, { success => JSON::PP::true, consumerGroup => 'g1',
	deletedPartitions => 2, metadataDeleted => JSON::PP::true } ], 'delete the whole group');
($st, $txns) = pop_txns('hq', 'p1', 'g1');
is($txns, 'a0,a1,a2,b0,b1', 'after the delete the group starts over');
($st, $doc) = http_json($node, 'DELETE', '/api/v1/consumer-groups/g1');
is($doc->{metadataDeleted}, JSON::PP::true, 'deleteMetadata defaults to true');

my (undef, $metrics) = http($node, 'GET', '/metrics');
for my $r ([ 'consumer_groups', 200 ], [ 'consumer_groups_lagging', 200 ], [ 'consumer_group', 200 ],
	[ 'seek', 200 ], [ 'seek', 400 ], [ 'seek_partition', 200 ], [ 'update_subscription', 200 ],
	[ 'delete_consumer_group', 200 ])
{
	like($metrics, qr/queen_streams_http_requests_total\{route="$r->[0]",code="$r->[1]"\} \d+/,
		"metrics count $r->[0] $r->[1]");
}

$node->stop;
done_testing();
