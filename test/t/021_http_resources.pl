# The resource and status read routes over HTTP as Queen's admin client and
# dashboard call them (facts §6): status codes, answer shapes, the query
# parameters each route reads, 404s, 400s, paging, the status filter and
# tenancy by x-queen-tenant; SQL and HTTP answer the same bodies.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = qs_node('resources', "queen_streams.tenancy = header\n");
my $B = { 'x-queen-tenant' => 'bbbbbbbb-0000-4000-8000-00000000000b' };

sub keys_of { return [ sort keys %{ $_[0] } ]; }

sub get
{
	my ($path, $hdr) = @_;
	my ($st, $doc) = http_json($node, 'GET', $path, undef, $hdr);
	return ($st, $doc);
}

# shop.orders: eu (3 messages), us (1) and configure's empty Default;
# dead-letter one of eu, lease another.
my ($st, $doc) = http_json($node, 'POST', '/api/v1/configure',
	{ queue => 'shop.orders', namespace => 'shop', task => 'fulfil' });
is($st, 200, 'configure');
($st) = http_json($node, 'POST', '/api/v1/push', { items => [
	(map { { queue => 'shop.orders', partition => 'eu', transactionId => "e$_", payload => { n => $_ } } } 1 .. 3),
	{ queue => 'shop.orders', partition => 'us', transactionId => 'u1', payload => 'x' } ] });
is($st, 201, 'push');
($st, $doc) = get('/api/v1/pop/queue/shop.orders/partition/eu?batch=1');
my $m = $doc->{messages}[0];
($st, $doc) = http_json($node, 'POST', '/api/v1/ack', { transactionId => $m->{transactionId},
	partitionId => $m->{partitionId}, status => 'dlq', error => 'bad', leaseId => $m->{leaseId} });
ok($doc->[0]{dlq}, 'e1 dead-lettered');
($st, $doc) = get('/api/v1/pop/queue/shop.orders/partition/eu?batch=1');
is($doc->{messages}[0]{transactionId}, 'e2', 'e2 leased');
my $pid = $m->{partitionId};

# ---- resources
($st, $doc) = get('/api/v1/resources/queues');
is($st, 200, 'queues: 200');
is_deeply(keys_of($doc->{queues}[0]), [qw(createdAt id messages name namespace partitions task)], 'queue keys');
is_deeply($doc->{queues}[0]{messages}, { total => 4, pending => 2, processing => 1 }, 'list counts');
like($doc->{queues}[0]{createdAt}, qr/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, 'milliseconds, UTC');
is_deeply($doc, json_sql($node, 'queen.queues_list()'), 'SQL and HTTP agree');

($st, $doc) = get('/api/v1/resources/queues/shop.orders');
is($st, 200, 'queue: 200');
is_deeply(keys_of($doc), [qw(createdAt id name namespace partitions task totals)], 'detail keys');
is_deeply($doc->{totals}, { total => 4, pending => 3, processing => 1, completed => 0,
	failed => 1, deadLetter => 1 }, 'detail totals');
is_deeply(keys_of($doc->{partitions}[0]), [qw(createdAt id name newestMessage oldestMessage stats)], 'partition keys');
($st, $doc) = get('/api/v1/resources/queues/nope');
is($st, 404, 'unknown queue: 404');
is($doc->{error}, 'queue not found', 'its message');

($st, $doc) = get('/api/v1/resources/overview');
is($st, 200, 'overview: 200');
is_deeply(keys_of($doc), [qw(lag messages namespaces partitions queues statsAge tasks throughput timestamp)], 'overview keys');
is($doc->{queues}, 1, 'one queue');
($st, $doc) = get('/api/v1/resources/namespaces');
is_deeply($doc->{namespaces}, [ { namespace => 'shop', queues => 1, partitions => 3,
	messages => { total => 4, pending => 2 } } ], 'namespaces');
($st, $doc) = get('/api/v1/resources/tasks');
is($doc->{tasks}[0]{task}, 'fulfil', 'tasks');

# ---- status
($st, $doc) = get('/api/v1/status');
is($st, 200, 'status: 200');
is_deeply(keys_of($doc), [qw(bucketMinutes deadLetterQueue errors leases messages pointCount queues
	statsAge throughput timeRange workers)], 'status keys');
is($doc->{throughput}[0]{ingested}, 4, 'pushed in the last minute');
($st, $doc) = get('/api/v1/status?from=2020-01-01T00:00:00Z&to=2020-01-02T00:00:00Z&queue=shop.orders');
is_deeply([ $st, $doc->{bucketMinutes}, $doc->{pointCount} ], [ 200, 15, 0 ], 'a past day: 15-minute buckets, none');
($st, $doc) = get('/api/v1/status?from=2020-01-02T00:00:00Z&to=2020-01-01T00:00:00Z');
is($st, 400, 'from after to: 400');

($st, $doc) = get('/api/v1/status/queues?limit=1&offset=0');
is_deeply([ $st, scalar @{ $doc->{queues} }, $doc->{pagination} ], [ 200, 1, { limit => 1, offset => 0 } ], 'status queues page');
($st, $doc) = get('/api/v1/status/queues?namespace=other');
is(scalar @{ $doc->{queues} }, 0, 'namespace filter');
($st, $doc) = get('/api/v1/status/queues?limit=-1');
is($st, 400, 'negative limit: 400');

($st, $doc) = get('/api/v1/status/queues/shop.orders');
is($st, 200, 'status queue: 200');
is_deeply(keys_of($doc->{queue}{config}), [qw(deadLetterQueue leaseTime maxQueueSize retryDelay retryLimit ttl)], 'config keys');
is_deeply(keys_of($doc->{partitions}[0]), [qw(createdAt cursor id lastActivity messages name newestMessage oldestMessage stats)],
	'status partition keys');
($st) = get('/api/v1/status/queues/nope');
is($st, 404, 'unknown queue: 404');

($st, $doc) = get('/api/v1/status/queues/shop.orders/messages?limit=2&offset=0');
is($st, 200, 'queue messages: 200');
is(ref $doc, 'ARRAY', 'a top-level array');
is_deeply(keys_of($doc->[0]), [qw(createdAt id partition partitionId queue queuePath status transactionId)], 'message keys');
my ($st2, $rest) = get('/api/v1/status/queues/shop.orders/messages?limit=10&offset=2');
is(scalar(@$doc) + scalar(@$rest), 4, 'two pages cover the queue');
($st) = get('/api/v1/status/queues/nope/messages');
is($st, 404, 'unknown queue: 404');

# ---- messages
($st, $doc) = get('/api/v1/messages?queue=shop.orders&limit=200&offset=0');
is($st, 200, 'messages: 200');
is_deeply(keys_of($doc), [qw(messages mode)], 'messages keys');
is_deeply(keys_of($doc->{messages}[0]), [qw(busStatus createdAt id leaseExpiresAt namespace partition partitionId
	producerSub queue queuePath queuePriority queueStatus status task traceId transactionId)], 'listed message keys');
($st, $doc) = get('/api/v1/messages?ns=shop&status=dead_letter');
is_deeply([ map { $_->{transactionId} } @{ $doc->{messages} } ], ['e1'], 'ns and status filters');
($st, $doc) = get('/api/v1/messages?status=processing&partition=eu');
is_deeply([ map { $_->{transactionId} } @{ $doc->{messages} } ], ['e2'], 'processing, partition filter');
($st, $doc) = get('/api/v1/messages?status=failed');
is($st, 400, 'unknown status: 400');

($st, $doc) = get("/api/v1/messages/$pid/e1");
is($st, 200, 'message: 200');
is_deeply([ @$doc{qw(status errorMessage isEncrypted)} ], [ 'dead_letter', 'bad', JSON::PP::false ], 'one message');
is_deeply($doc->{payload}, { n => 1 }, 'its payload');
is_deeply($doc, json_sql($node, "queen.message('$pid', 'e1')"), 'SQL and HTTP agree');
($st, $doc) = get("/api/v1/messages/$pid/nope");
is($st, 404, 'unknown message: 404');
is($doc->{error}, 'message not found', 'its message');

# ---- tenancy: another tenant sees nothing of these
($st, $doc) = get('/api/v1/resources/queues', $B);
is_deeply([ $st, $doc->{queues} ], [ 200, [] ], 'tenant B: no queues');
($st) = get('/api/v1/resources/queues/shop.orders', $B);
is($st, 404, 'tenant B: the queue is not found');
($st) = get("/api/v1/messages/$pid/e1", $B);
is($st, 404, 'tenant B: the message is not found');
($st, $doc) = get('/api/v1/messages', $B);
is_deeply($doc->{messages}, [], 'tenant B: no messages');

done_testing();
