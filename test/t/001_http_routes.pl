# Every route of the HTTP listener and its status codes; SQL and HTTP give
# the same bodies; tenancy from x-queen-tenant and the 404 ownership gate.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = qs_node('routes');

# ---- push
my ($st, $doc, $hdr, $raw) = http_json($node, 'POST', '/api/v1/push',
	{ items => [
		{ queue => 'orders', payload => { id => 1 } },
		{ queue => 'orders', partition => 'eu', payload => { id => 2 }, transactionId => 'o-2' } ] });
is($st, 201, 'push answers 201');
is(scalar @$doc, 2, 'one result per item');
is($doc->[1]{status}, 'queued', 'item queued');
like($hdr->{'content-type'}, qr{^application/json}, 'JSON content type');
my $o2 = $doc->[1]{message_id};

($st, $doc) = http_json($node, 'POST', '/api/v1/push',
	{ items => [ { queue => 'orders', partition => 'eu', payload => { id => 2 }, transactionId => 'o-2' } ] });
is($st, 201, 'repeated push answers 201');
is($doc->[0]{status}, 'duplicate', 'repeated transactionId is a duplicate');
is($doc->[0]{message_id}, $o2, 'duplicate names the original id');

($st, $doc, $hdr, $raw) = http_json($node, 'POST', '/api/v1/push', { items => [] });
is($st, 201, 'empty push answers 201');
is($raw, '[]', 'empty push answers []');

($st, $doc) = http_json($node, 'POST', '/api/v1/push', '{"items": [');
is($st, 400, 'unparsable body answers 400');
like($doc->{error}, qr/^bad body: /, 'bad body error');

# a number numeric refuses is the text's error too; an item's is its own
($st, $doc) = http_json($node, 'POST', '/api/v1/push', '{"items":[{"queue":"q","payload":1e999999}]}');
is($st, 400, 'a number jsonb refuses answers 400');
like($doc->{error}, qr/^bad body: value overflows numeric format/, 'as a bad body');
($st, $doc) = http_json($node, 'POST', '/api/v1/push', '{"items":[{"queue":"q","traceId":"no"}]}');
is($st, 400, 'an item error answers 400');
is($doc->{error}, 'item 0: "traceId" must be a UUID', 'with its own message, not as a bad body');

($st, $doc) = http_json($node, 'POST', '/api/v1/push', { nothing => 1 });
is($st, 400, 'push without items answers 400');
is($doc->{error}, 'items array is required', 'the function\'s message');

($st, $doc) = http_json($node, 'POST', '/api/v1/push', { items => [ { payload => 1 } ] });
is($st, 400, 'item without queue answers 400');

# ---- pop and ack
($st, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/orders/partition/eu?batch=10');
is($st, 200, 'partition pop answers 200');
is(scalar @{ $doc->{messages} }, 1, 'one message');
is($doc->{partition}, 'eu', 'from the named partition');
my $m = $doc->{messages}[0];
is_deeply($m->{data}, { id => 2 }, 'payload');

($st, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/orders/partition/eu?batch=10');
is($st, 204, 'nothing left answers 204');

($st, $doc) = http_json($node, 'POST', '/api/v1/ack',
	{ transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
	  leaseId => $m->{leaseId}, status => 'completed' });
is($st, 200, 'ack answers 200');
ok($doc->[0]{success}, 'ack succeeded');

($st, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/orders?batch=10&autoAck=true');
is($st, 200, 'wildcard pop answers 200');
is($doc->{messages}[0]{data}{id}, 1, 'the Default partition message');
is($doc->{leaseId}, '', 'autoAck has no lease');

($st, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/orders?batch=0');
is($st, 400, 'batch=0 answers 400');
($st, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/orders?batch=ten');
is($st, 400, 'batch=ten answers 400');
# any subscription mode Queen accepts; only "new" means new
http_json($node, 'POST', '/api/v1/push', { items => [ { queue => 'modes', payload => { id => 1 } } ] });
($st, $doc) = http_json($node, 'GET',
	'/api/v1/pop/queue/modes?subscriptionMode=from_beginning&consumerGroup=fb&batch=10');
is($st, 200, 'subscriptionMode=from_beginning answers 200');
is($doc->{messages}[0]{data}{id}, 1, 'from_beginning reads the backlog');
($st, $doc) = http_json($node, 'GET',
	'/api/v1/pop/queue/modes?subscriptionMode=sometimes&consumerGroup=st&batch=10');
is($st, 200, 'an unknown mode reads like all');
($st, $doc) = http_json($node, 'GET',
	'/api/v1/pop/queue/modes?subscriptionMode=new&consumerGroup=nw&batch=10');
is($st, 204, 'subscriptionMode=new skips the backlog');
($st, $doc) = http_json($node, 'GET',
	'/api/v1/pop/queue/modes?subscriptionFrom=notadate&consumerGroup=nd');
is($st, 400, 'an unparsable subscriptionFrom answers 400');
($st) = http_json($node, 'GET', '/api/v1/pop/queue/nosuchqueue');
is($st, 204, 'unknown queue answers 204');

# ack batch
http_json($node, 'POST', '/api/v1/push',
	{ items => [ map { { queue => 'batchq', payload => { n => $_ } } } 1 .. 3 ] });
($st, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/batchq?batch=3&consumerGroup=g1');
is(scalar @{ $doc->{messages} }, 3, 'three messages leased');
my @acks = map { { transactionId => $_->{transactionId}, partitionId => $_->{partitionId},
	leaseId => $_->{leaseId} } } @{ $doc->{messages} };
($st, $doc) = http_json($node, 'POST', '/api/v1/ack/batch',
	{ consumerGroup => 'g1', acknowledgments => \@acks });
is($st, 200, 'batch ack answers 200');
is(scalar(grep { $_->{success} } @$doc), 3, 'every ack succeeded');
($st, $doc) = http_json($node, 'POST', '/api/v1/ack/batch', { consumerGroup => 'g1' });
is($st, 400, 'batch ack without acknowledgments answers 400');
is($doc->{error}, 'acknowledgments array is required', 'its message');

# the same ack of an unknown transaction, over SQL and HTTP
my $bad_ack = { transactionId => 'nope', partitionId => $m->{partitionId}, leaseId => $m->{leaseId} };
($st, $doc) = http_json($node, 'POST', '/api/v1/ack', $bad_ack);
is($st, 200, 'per-item failures still answer 200');
is_deeply($doc, call_sql($node, 'queen.ack', $bad_ack), 'ack: SQL and HTTP give the same body');

# lease extension
http_json($node, 'POST', '/api/v1/push', { items => [ { queue => 'leaseq', payload => {} } ] });
($st, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/leaseq');
my $lease = $doc->{leaseId};
($st, $doc) = http_json($node, 'POST', "/api/v1/lease/$lease/extend", { seconds => 120 });
is($st, 200, 'lease extension answers 200');
ok($doc->{success}, 'lease extended');
is($doc->{renewed}, 1, 'one lease renewed');
($st, $doc) = http_json($node, 'POST', "/api/v1/lease/$lease/extend");
is($st, 200, 'lease extension without a body answers 200');
($st, $doc) = http_json($node, 'POST', '/api/v1/lease/unknown-lease/extend', { seconds => 30 });
is_deeply($doc, json_sql($node, q{queen.renew_lease('unknown-lease', 30)}),
	'lease: SQL and HTTP give the same body');
($st, $doc) = http_json($node, 'POST', "/api/v1/lease/$lease/extend", { seconds => 0 });
is($st, 400, 'seconds=0 answers 400');

# ---- health, metrics, unknown routes
($st, $doc) = http_json($node, 'GET', '/health');
is($st, 200, 'health answers 200');
is($doc->{status}, 'healthy', 'healthy');
($st, undef, $hdr, $raw) = http_json($node, 'GET', '/metrics');
is($st, 200, 'metrics answer 200');
like($hdr->{'content-type'}, qr{^text/plain}, 'Prometheus text');
like($raw, qr/queen_streams_queue_pushed_messages_total\{tenant="00000000-0000-0000-0000-000000000001",queue="orders"\} 2/,
	'pushes counted per queue');
like($raw, qr/queen_streams_http_requests_total\{route="push",code="201"\} \d+/, 'requests counted');
is($node->safe_psql('postgres',
	"SELECT pushed || '/' || popped FROM queen_streams.metrics WHERE queue = 'orders'"),
	'2/2', 'the SQL view shows the same counters');

($st, $doc) = http_json($node, 'GET', '/api/v2/nothing');
is($st, 404, 'unknown path answers 404');
($st, undef, $hdr) = http_json($node, 'GET', '/api/v1/push');
is($st, 405, 'wrong method answers 405');
is($hdr->{allow}, 'POST', 'with Allow');

# ---- streams routes
my $reg = { name => 'counts', source_queue => 'events', sink_queue => 'events.out',
	config_hash => 'h1' };
($st, $doc) = http_json($node, 'POST', '/streams/v1/queries', $reg);
is($st, 200, 'register answers 200');
ok($doc->{fresh}, 'fresh registration');
my $qid = $doc->{query_id};
($st, $doc) = http_json($node, 'POST', '/streams/v1/queries', $reg);
is_deeply($doc, call_sql($node, 'queen_streams.register_query', $reg),
	'register: SQL and HTTP give the same body');
($st, $doc) = http_json($node, 'POST', '/streams/v1/queries', { %$reg, config_hash => 'h2' });
is($st, 409, 'changed config_hash answers 409');
ok(!$doc->{success}, 'success false');
($st, $doc) = http_json($node, 'POST', '/streams/v1/queries', { name => 'x', source_queue => 'events' });
is($st, 400, 'missing config_hash answers 400');
is($doc->{error}, 'config_hash is required', 'its message');

# a cycle over a real lease
http_json($node, 'POST', '/api/v1/push',
	{ items => [ map { { queue => 'events', payload => { k => 'a' } } } 1 .. 4 ] });
($st, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/events?batch=10&consumerGroup=streams.counts');
is(scalar @{ $doc->{messages} }, 4, 'source batch leased');
my $pid = $doc->{partitionId};
my $last = $doc->{messages}[-1];
my $cycle = {
	query_id => $qid, partition_id => $pid, consumer_group => 'streams.counts',
	state_ops => [ { type => 'upsert', key => 'a', value => { acc => 4, windowEnd => 1000 } } ],
	push_items => [ { queue => 'events.out', payload => { key => 'a', count => 4 } } ],
	ack => { transactionId => $last->{transactionId}, leaseId => $last->{leaseId},
		status => 'completed', count => 4 } };
($st, $doc) = http_json($node, 'POST', '/streams/v1/cycle', $cycle);
is($st, 200, 'cycle answers 200');
ok($doc->{success}, 'cycle committed');
is($doc->{ack_result}{count}, 4, 'source acked');
is($node->safe_psql('postgres',
	q{SELECT queen.pop('events.out', auto_ack => true)->'messages'->0->'data'->>'count'}),
	'4', 'sink message landed');

($st, $doc) = http_json($node, 'POST', '/streams/v1/cycle', $cycle);
is($st, 200, 'a failed cycle still answers 200');
ok(!$doc->{success}, 'the retried cycle fails on its released lease');

my $bad = { query_id => $qid, partition_id => $pid,
	state_ops => [ { type => 'upsrt', key => 'z', value => {} } ] };
($st, $doc) = http_json($node, 'POST', '/streams/v1/cycle', $bad);
is($st, 200, 'unknown op type answers 200');
ok(!$doc->{success}, 'with success false');
is_deeply($doc, call_sql($node, 'queen_streams.cycle', $bad), 'cycle: SQL and HTTP give the same body');
($st, $doc) = http_json($node, 'POST', '/streams/v1/cycle', { partition_id => $pid });
is($st, 400, 'cycle without query_id answers 400');
is($doc->{error}, 'query_id is required', 'its message');

my $sg = { query_id => $qid, partition_id => $pid, ripe_at_or_before => 5000 };
($st, $doc) = http_json($node, 'POST', '/streams/v1/state/get', $sg);
is($st, 200, 'state/get answers 200');
is_deeply([ map { $_->{key} } @{ $doc->{rows} } ], ['a'], 'the upserted row');
is_deeply($doc, call_sql($node, 'queen_streams.state_get', $sg),
	'state/get: SQL and HTTP give the same body');
($st, $doc) = http_json($node, 'POST', '/streams/v1/state/get', { query_id => $qid });
is($st, 400, 'state/get without partition_id answers 400');
($st, $doc) = http_json($node, 'POST', '/streams/v1/state/get', '[1]');
is($st, 400, 'a body that is not an object answers 400');

my (undef, $metrics) = http($node, 'GET', '/metrics');
like($metrics, qr/queen_streams_queue_cycles_total\{tenant="[^"]+",queue="events"\} 1\n/,
	'the cycle counts on its source queue');
like($metrics, qr/queen_streams_queue_acked_messages_total\{tenant="[^"]+",queue="events"\} 4\n/,
	'its source ack counts as acks');
like($metrics, qr/queen_streams_queue_pushed_messages_total\{tenant="[^"]+",queue="events.out"\} 1\n/,
	'its sink push counts as a push');

# ---- tenancy (also a SIGHUP reload)
$node->safe_psql('postgres', "ALTER SYSTEM SET queen_streams.tenancy = 'header'");
$node->reload;
# every worker reloads on its own: wait until several answers in a row
# (new connections, spread over the workers) show the new setting
my $deadline = time + 30;
my $in_a_row = 0;
while (time < $deadline && $in_a_row < 6)
{
	($st) = http_json($node, 'GET', '/api/v1/pop/queue/orders', undef, { 'x-queen-tenant' => 'nope' });
	$in_a_row = $st == 400 ? $in_a_row + 1 : 0;
	select(undef, undef, undef, 0.1) if $st != 400;
}
note("tenancy reload: $in_a_row answers 400 in a row");
($st, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/orders', undef, { 'x-queen-tenant' => 'nope' });
is($st, 400, 'malformed tenant header answers 400');
is($doc->{error}, 'invalid x-queen-tenant header (must be a UUID)', 'its message');

my $ta = '11111111-1111-1111-1111-111111111111';
my $tb = '22222222-2222-2222-2222-222222222222';
$node->safe_psql('postgres', "INSERT INTO queen_streams.quota (tenant_id) VALUES ('$ta')");
($st, $doc) = http_json($node, 'POST', '/api/v1/push',
	{ items => [ { queue => 'tq', payload => { t => 'a' } } ] }, { 'x-queen-tenant' => $ta });
is($st, 201, 'tenant A pushes');
($st, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/tq', undef, { 'x-queen-tenant' => $tb });
is($st, 204, 'tenant B does not see tenant A\'s queue');
($st, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/tq?consumerGroup=streams.t', undef,
	{ 'x-queen-tenant' => $ta });
is($st, 200, 'tenant A pops its own queue');
my $tpid = $doc->{partitionId};
($st, $doc) = http_json($node, 'POST', '/streams/v1/queries',
	{ name => 't', source_queue => 'tq', config_hash => 'h' }, { 'x-queen-tenant' => $ta });
is($st, 200, 'tenant A with a quota registers');
my $tqid = $doc->{query_id};
($st, $doc) = http_json($node, 'POST', '/streams/v1/queries',
	{ name => 't', source_queue => 'tq', config_hash => 'h' }, { 'x-queen-tenant' => $tb });
is($st, 403, 'tenant B without a quota is denied');
ok($doc->{denied}, 'denied true');

for my $route ('state/get', 'cycle')
{
	($st, $doc, undef, $raw) = http_json($node, 'POST', "/streams/v1/$route",
		{ query_id => $tqid, partition_id => $tpid }, { 'x-queen-tenant' => $tb });
	is($st, 404, "$route: a foreign partition answers 404");
	is($raw, '{"error":"not found"}', "$route: not found");
	($st, $doc, undef, $raw) = http_json($node, 'POST', "/streams/v1/$route",
		{ query_id => $tqid, partition_id => '0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f' },
		{ 'x-queen-tenant' => $ta });
	is($st, 404, "$route: a missing partition answers the same 404");
	is($raw, '{"error":"not found"}', "$route: same body");
}
($st, $doc) = http_json($node, 'POST', '/streams/v1/state/get',
	{ query_id => $tqid, partition_id => $tpid }, { 'x-queen-tenant' => $ta });
is($st, 200, 'the owner reads its state');
($st) = http_json($node, 'GET', '/api/v1/pop/queue/orders');
is($st, 204, 'no header is the default tenant');

# ---- pop answers the payloads as pushed: escapes, exponents, deep nesting
{
	my $deep = ('[' x 600) . '1' . (']' x 600);
	my $body = '{"items":[{"queue":"wire","transactionId":"w1","payload":{"s":"caf\u00e9 \"q\"","n":1.5e3}},'
		. '{"queue":"wire","transactionId":"w2","payload":' . $deep . '},'
		. '{"queue":"wire","transactionId":"w3","payload":{"plain":true}}]}';
	my ($pst) = http($node, 'POST', '/api/v1/push', $body);
	is($pst, 201, 'push of escaped, exponent and deeply nested payloads: 201');
	my ($st, $raw) = http($node, 'GET', '/api/v1/pop/queue/wire?batch=10');
	is($st, 200, 'their pop answers 200');
	my $doc = JSON::PP->new->utf8->max_depth(2000)->decode($raw);
	is(join(',', map { $_->{transactionId} } @{ $doc->{messages} // [] }), 'w1,w2,w3', '... with the three messages');
	is($doc->{messages}[0]{data}{s}, "caf\x{e9} \"q\"", '... an escaped string as pushed');
	is($doc->{messages}[0]{data}{n}, 1500, '... a number with an exponent');
	like($raw, qr/"data":\[{600}1\]{600}/, '... the nested payload as pushed');
	is($doc->{partitionsClaimed}, 1, '... from one partition');
}

$node->stop;
done_testing();
