# Queen client compatibility, written from the facts sheet of Queen's HTTP
# API: for each route, the exact request the official JavaScript client
# (QueueBuilder, ConsumerManager, TransactionBuilder, DLQBuilder, Admin)
# sends, and the fields of the answer it reads. The client throws on any
# status outside 2xx and returns null on 204, so each step checks the status
# class and then every field the client uses.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Utils;
use QsHttp;
use Test::More;

my $node = qs_node('compat');
my $true = JSON::PP::true;
my $false = JSON::PP::false;

# As the JS HttpClient: 2xx or a failure; 204 is null.
sub client
{
	my ($method, $path, $body, $what) = @_;
	my ($st, $doc) = http_json($node, $method, $path, $body);
	ok($st >= 200 && $st < 300, "$what: $method $path answers 2xx (got $st)")
	  or diag explain $doc;
	return $st == 204 ? undef : $doc;
}

sub has_fields
{
	my ($doc, $what, @keys) = @_;
	my @missing = grep { !(ref $doc eq 'HASH' && exists $doc->{$_}) } @keys;
	is("@missing", '', "$what has " . join(', ', @keys));
}

# A UUIDv7 as the client mints for transactionId.
my $seq = 0;
sub uuid7
{
	my $ms = int(time * 1000);
	$seq++;
	return sprintf('%08x-%04x-7%03x-8%03x-%012x',
		$ms >> 16, $ms & 0xffff, $seq & 0xfff, ($seq >> 12) & 0xfff, $seq);
}

# QUEUE_DEFAULTS of clients/client-js/client-v2/utils/defaults.js
my %QUEUE_DEFAULTS = (leaseTime => 300, retryLimit => 3, priority => 0, delayedProcessing => 0,
	windowBuffer => 0, maxSize => 0, retentionSeconds => 0, completedRetentionSeconds => 0,
	encryptionEnabled => $false);

# ---- queue('orders').create(): defaults, null namespace and task
my $doc = client('POST', '/api/v1/configure',
	{ queue => 'orders', namespace => undef, task => undef, options => {%QUEUE_DEFAULTS} },
	'create()');
is($doc->{configured}, $true, 'create() reads configured: true');
ok(!exists $doc->{error}, 'and no error');
has_fields($doc, 'configure answer', qw(queueId partitionId queue namespace task options));
is($doc->{namespace}, '', 'namespace "" as Queen answers');
is(scalar(keys %{ $doc->{options} }) >= 15, 1, 'options lists every option');

# ---- .config({...}) with the README's extra keys, then create()
$doc = client('POST', '/api/v1/configure',
	{ queue => 'orders.dlq', namespace => 'shop', task => 'dlq',
	  options => { %QUEUE_DEFAULTS, ttl => 7200, retryDelay => 0, retryLimit => 0,
		  dlqAfterMaxRetries => $true, retentionEnabled => $true, maxWaitTimeSeconds => 0 } },
	'config().create()');
is($doc->{options}{ttl}, 7200, 'ttl stored and echoed');
is($doc->{options}{retryLimit}, 0, 'retryLimit stored and echoed');
is_deeply($doc->{ignored}, [], 'nothing ignored');

# ---- push: items with partition 'Default' and a client UUIDv7 transactionId
my @txns = map { uuid7() } 1 .. 3;
$doc = client('POST', '/api/v1/push',
	{ items => [ map { { queue => 'orders', partition => 'Default', payload => { n => $_ },
		transactionId => $txns[$_] } } 0 .. 2 ] }, 'push()');
is(ref $doc, 'ARRAY', 'push answers an array');
has_fields($doc->[0], 'push result', qw(index transaction_id status message_id partition_id queueName));
is($doc->[0]{status}, 'queued', 'queued');
$doc = client('POST', '/api/v1/push',
	{ items => [ { queue => 'orders', partition => 'Default', payload => { n => 0 }, transactionId => $txns[0] } ] },
	'push() retried');
is($doc->[0]{status}, 'duplicate', 'a retried push is a duplicate');

# ---- pop(): wait and timeout always sent, namespace/task when set
$doc = client('GET', '/api/v1/pop/queue/orders?batch=2&wait=false&timeout=30000&namespace=shop&task=x',
	undef, 'pop()');
has_fields($doc, 'pop answer', qw(messages leaseId partitionId consumerGroup));
has_fields($doc->{messages}[0], 'a message',
	qw(id transactionId data createdAt partitionId partition leaseId consumerGroup));
is($doc->{messages}[0]{transactionId}, $txns[0], 'in order');
my $popped = $doc;

# ---- ack(): error and consumerGroup null, leaseId from the message
$doc = client('POST', '/api/v1/ack',
	{ transactionId => $popped->{messages}[0]{transactionId}, partitionId => $popped->{messages}[0]{partitionId},
	  status => 'completed', error => undef, consumerGroup => undef, leaseId => $popped->{messages}[0]{leaseId} },
	'ack()');
is(ref $doc, 'ARRAY', 'ack answers an array');
has_fields($doc->[0], 'ack result', qw(index transactionId success error));
is($doc->[0]{success}, $true, 'acked');

# ---- lease renew: body {}
$doc = client('POST', "/api/v1/lease/$popped->{leaseId}/extend", {}, 'renew()');

# ---- ack batch with _status turned into status, top-level consumerGroup
$doc = client('POST', '/api/v1/ack/batch',
	{ acknowledgments => [ { transactionId => $popped->{messages}[1]{transactionId},
		partitionId => $popped->{messages}[1]{partitionId}, status => 'completed', error => undef,
		leaseId => $popped->{leaseId} } ], consumerGroup => undef }, 'ack([...])');
is($doc->[0]{success}, $true, 'batch acked');

# ---- consume() in a group from the beginning (the client's subscription mode)
$doc = client('GET', '/api/v1/pop/queue/orders?batch=10&wait=false&timeout=30000'
	  . '&consumerGroup=analytics&subscriptionMode=from_beginning', undef, 'group consume()');
is(scalar @{ $doc->{messages} }, 3, 'from_beginning reads the whole backlog');
my $group_batch = $doc;
is(client('GET', '/api/v1/pop/queue/orders?batch=10&consumerGroup=fresh&subscriptionMode=new',
	undef, 'new-mode consume()'), undef, 'subscriptionMode=new answers 204 (null)');

# ---- transaction(): push to another queue and ack in one call
$doc = client('POST', '/api/v1/transaction',
	{ operations => [
		{ type => 'push', items => [ { queue => 'orders.done', payload => { n => 2 } } ] },
		{ type => 'ack', transactionId => $group_batch->{messages}[2]{transactionId},
		  partitionId => $group_batch->{messages}[2]{partitionId}, status => 'completed',
		  consumerGroup => 'analytics' } ],
	  requiredLeases => [ $group_batch->{leaseId} ] }, 'transaction().commit()');
is($doc->{success}, $true, 'commit() reads success: true');
has_fields($doc, 'transaction answer', qw(transactionId success results));
$doc = client('POST', '/api/v1/transaction',
	{ operations => [
		{ type => 'push', items => [ { queue => 'orders.done', payload => { n => 3 } } ] },
		{ type => 'ack', transactionId => 'no-such-message', partitionId => $group_batch->{partitionId},
		  status => 'completed', consumerGroup => 'analytics' } ] }, 'a failing commit()');
is($doc->{success}, $false, 'rolled back: success false with HTTP 200');
ok(defined $doc->{error}, 'with the error the client throws');
$doc = client('GET', '/api/v1/pop/queue/orders.done?batch=10&autoAck=true', undef, 'pop the sink');
is(join(',', map { $_->{data}{n} } @{ $doc->{messages} }), '2', 'only the committed push landed');

# ---- a dead letter, then DLQBuilder
client('POST', '/api/v1/push', { items => [ { queue => 'orders.dlq', partition => 'Default',
	payload => { bad => 1 }, transactionId => uuid7() } ] }, 'push to orders.dlq');
$doc = client('GET', '/api/v1/pop/queue/orders.dlq?batch=1&consumerGroup=workers&wait=false&timeout=30000',
	undef, 'pop orders.dlq');
my $bad = $doc->{messages}[0];
$doc = client('POST', '/api/v1/ack', { transactionId => $bad->{transactionId}, partitionId => $bad->{partitionId},
	status => 'failed', error => 'boom', consumerGroup => 'workers', leaseId => $bad->{leaseId} }, 'ack(failed)');
is($doc->[0]{dlq}, $true, 'retryLimit 0: dead-lettered');
$doc = client('GET', '/api/v1/dlq?queue=orders.dlq&consumerGroup=workers&limit=100&offset=0', undef, 'dlq().get()');
has_fields($doc, 'dlq answer', qw(messages total));
is($doc->{total}, 1, 'total, which the builder returns');
has_fields($doc->{messages}[0], 'a dead letter',
	qw(id transactionId partitionId queue partition consumerGroup errorMessage retryCount data createdAt failedAt));
is($doc->{messages}[0]{errorMessage}, 'boom', 'with its error');
$doc = client('POST', "/api/v1/messages/$bad->{partitionId}/$bad->{transactionId}/retry", undef,
	'admin.retryMessage()');
$doc = client('GET', '/api/v1/pop/queue/orders.dlq?batch=1&consumerGroup=workers', undef, 'pop the requeued');
is($doc->{messages}[0]{transactionId}, $bad->{transactionId}, 'the dead letter is back');

# ---- consumer groups (Admin)
$doc = client('GET', '/api/v1/consumer-groups', undef, 'admin.listConsumerGroups()');
is(ref $doc, 'ARRAY', 'a top-level array');
my ($analytics) = grep { $_->{name} eq 'analytics' } @$doc;
has_fields($analytics, 'a group', qw(name topics queueName members totalLag maxTimeLag state subscriptionMode));
$doc = client('GET', '/api/v1/consumer-groups/analytics', undef, 'admin.getConsumerGroup()');
has_fields($doc->{orders}, 'its queue', qw(partitions));
$doc = client('GET', '/api/v1/consumer-groups/lagging?minLagSeconds=60', undef, 'admin.getLaggingGroups()');
is(ref $doc, 'ARRAY', 'lagging: an array');
$doc = client('POST', '/api/v1/consumer-groups/analytics/queues/orders/seek', { toEnd => $true },
	'admin.seek(toEnd)');
is($doc->{success}, $true, 'seek answers success');
$doc = client('POST', '/api/v1/consumer-groups/analytics/subscription',
	{ subscriptionTimestamp => '2026-01-01T00:00:00.000Z' }, 'admin.updateSubscription()');
is($doc->{success}, $true, 'subscription answers success');
$doc = client('DELETE', '/api/v1/consumer-groups/fresh?deleteMetadata=true', undef, 'admin.deleteConsumerGroup()');
is($doc->{success}, $true, 'delete answers success');

# ---- resources and status (Admin, dashboard)
$doc = client('GET', '/api/v1/resources/queues', undef, 'admin.listQueues()');
has_fields($doc->{queues}[0], 'a queue', qw(id name namespace task createdAt partitions messages));
$doc = client('GET', '/api/v1/resources/queues/orders', undef, 'admin.getQueue()');
has_fields($doc, 'queue detail', qw(id name partitions totals));
$doc = client('GET', '/api/v1/resources/overview', undef, 'admin.getOverview()');
has_fields($doc, 'overview', qw(queues partitions messages));
client('GET', '/api/v1/resources/namespaces', undef, 'admin.getNamespaces()');
client('GET', '/api/v1/resources/tasks', undef, 'admin.getTasks()');
$doc = client('GET', '/api/v1/status', undef, 'dashboard status');
has_fields($doc, 'status', qw(throughput queues messages));
$doc = client('GET', '/api/v1/status/queues?limit=100&offset=0', undef, 'dashboard queues');
has_fields($doc, 'status queues', qw(queues pagination));
$doc = client('GET', '/api/v1/status/queues/orders', undef, 'dashboard queue');
has_fields($doc, 'status queue', qw(queue partitions totals));
$doc = client('GET', '/api/v1/status/queues/orders/messages?limit=50&offset=0', undef, 'dashboard queue messages');
is(ref $doc, 'ARRAY', 'queue messages: a top-level array');
$doc = client('GET', '/api/v1/messages?queue=orders&limit=200&offset=0', undef, 'admin.listMessages()');
has_fields($doc, 'messages', qw(messages));
$doc = client('GET', "/api/v1/messages/$popped->{messages}[0]{partitionId}/$popped->{messages}[0]{transactionId}",
	undef, 'admin.getMessage()');
has_fields($doc, 'one message', qw(id transactionId payload));
is(client('GET', '/api/v1/status/buffers', undef, 'buffers')->{pending}, 0, 'nothing buffered');

# ---- traces
$doc = client('POST', '/api/v1/traces', { transactionId => $popped->{messages}[0]{transactionId},
	partitionId => $popped->{messages}[0]{partitionId}, consumerGroup => '__QUEUE_MODE__',
	traceNames => ['checkout'], eventType => 'info', data => { step => 1 } }, 'msg.trace()');
is($doc->{success}, $true, 'trace stored');
$doc = client('GET', "/api/v1/traces/$popped->{messages}[0]{partitionId}/$popped->{messages}[0]{transactionId}",
	undef, 'traces of a message');
is(scalar @{ $doc->{traces} }, 1, 'one trace');
client('GET', '/api/v1/traces/by-name/checkout?limit=100&offset=0', undef, 'traces by name');
client('GET', '/api/v1/traces/names?limit=50&offset=0', undef, 'trace names');

# ---- maintenance (Admin)
$doc = client('GET', '/api/v1/system/maintenance', undef, 'admin.getMaintenance()');
has_fields($doc, 'maintenance', qw(maintenanceMode bufferedMessages bufferHealthy bufferStats));
$doc = client('GET', '/api/v1/system/maintenance/pop', undef, 'admin.getPopMaintenance()');
has_fields($doc, 'pop maintenance', qw(popMaintenanceMode message));

# ---- queue('orders').delete()
$doc = client('DELETE', '/api/v1/resources/queues/orders.done', undef, 'delete()');
ok($doc->{deleted}, 'deleted');

done_testing();
