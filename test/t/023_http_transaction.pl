# POST /api/v1/transaction over HTTP with the JS TransactionBuilder's exact
# body: 200 with {transactionId, success, results} whether it commits or
# not, 400 for a body without operations, and a long-poll pop parked on
# each queue the transaction pushed to wakes at its commit (and not for a
# transaction that rolled back).
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use IO::Socket::INET;
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = qs_node('transaction');

my $uuid = qr/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

# ---- validation: 400 with {"error"}
my ($st, $doc) = http_json($node, 'POST', '/api/v1/transaction', { requiredLeases => [] });
is($st, 400, 'no operations array: 400');
is_deeply($doc, { error => 'operations array required' }, 'with its error');
($st, $doc) = http_json($node, 'POST', '/api/v1/transaction', { operations => [] });
is($st, 400, 'an empty operations array: 400');
is_deeply($doc, { error => 'operations array cannot be empty' }, 'with its error');

# ---- a batch to consume: pushed and leased over HTTP
($st) = http_json($node, 'POST', '/api/v1/push', { items => [
	map { { queue => 'src', partition => 'Default', payload => { n => $_ }, transactionId => "m$_" } } 1 .. 2 ] });
is($st, 201, 'source pushed');
my ($pst, $batch) = http_json($node, 'GET', '/api/v1/pop/queue/src?batch=10');
is($pst, 200, 'source popped');
my @msgs = @{ $batch->{messages} };
is(scalar @msgs, 2, 'two messages leased');

# ---- pops parked on both queues the transaction will push to
my $pa = park_pop($node, '/api/v1/pop/queue/out_a?autoAck=true&wait=true&timeout=20000');
my $pb = park_pop($node, '/api/v1/pop/queue/out_b?autoAck=true&wait=true&timeout=20000');
is(wait_parked($node, 2), 2, 'two pops parked');

# The body exactly as TransactionBuilder.commit() sends it:
# .queue('out_a').push([{data}]) .queue('out_b').partition('eu').push([{payload}])
# .ack(msgs) -- no transactionId or traceId on items, no leaseId on acks,
# the lease ids in a top-level requiredLeases.
my $body = {
	operations => [
		{ type => 'push', items => [ { queue => 'out_a', payload => { from => 'txn', q => 'a' } } ] },
		{ type => 'push', items => [ { queue => 'out_b', partition => 'eu', payload => { from => 'txn', q => 'b' } } ] },
		(map { { type => 'ack', transactionId => $_->{transactionId},
				 partitionId => $_->{partitionId}, status => 'completed' } } @msgs),
	],
	requiredLeases => [ $msgs[0]{leaseId} ],
};
($st, $doc) = http_json($node, 'POST', '/api/v1/transaction', $body);
is($st, 200, 'the transaction answers 200');
is(join(',', sort keys %$doc), 'results,success,transactionId', 'with transactionId, success, results');
ok($doc->{success}, 'and commits');
like($doc->{transactionId}, $uuid, 'transactionId is a UUID');
my @res = @{ $doc->{results} };
is(scalar @res, 4, 'one result per pushed item and per ack');
is(join(',', map { "$_->{index}:$_->{type}" } @res), '0:push,1:push,2:ack,3:ack', 'in op order');
is(join(',', sort keys %{ $res[0] }),
	'index,messageId,partitionId,queueName,status,success,transactionId,type', 'push result fields');
is(join(',', map { $_->{queueName} . '/' . $_->{status} } @res[0, 1]), 'out_a/queued,out_b/queued',
	'pushes queued on their queues');
like($res[1]{partitionId}, $uuid, 'push partitionId');
is(join(',', sort keys %{ $res[2] }), 'dlq,error,index,success,transactionId,type', 'ack result fields');
ok($res[2]{success} && $res[3]{success}, 'acks applied');

my ($sa, $ba) = read_response($pa, 10);
my ($sb, $bb) = read_response($pb, 10);
is($sa, 200, 'the pop parked on out_a wakes at the commit');
is($sb, 200, 'the pop parked on out_b wakes at the commit');
is(decode_json($ba)->{messages}[0]{data}{q}, 'a', 'with the message pushed to out_a');
is(decode_json($bb)->{messages}[0]{data}{q}, 'b', 'with the message pushed to out_b');
is(decode_json($bb)->{messages}[0]{partition}, 'eu', 'in the partition the builder named');
close $pa;
close $pb;
my (undef, $again) = http_json($node, 'GET', '/api/v1/pop/queue/src?batch=10');
is(scalar @{ $again->{messages} // [] }, 0, 'the source batch is consumed');

# ---- a transaction whose ack fails: 200 success:false, nothing pushed, nobody woken
my $pc = park_pop($node, '/api/v1/pop/queue/out_c?autoAck=true&wait=true&timeout=20000');
is(wait_parked($node, 1), 1, 'a pop parked on out_c');
($st, $doc) = http_json($node, 'POST', '/api/v1/transaction', {
	operations => [
		{ type => 'push', items => [ { queue => 'out_c', payload => { from => 'rolled back' } } ] },
		{ type => 'ack', transactionId => 'm1', partitionId => $msgs[0]{partitionId},
		  status => 'completed', consumerGroup => 'never-popped' } ],
	requiredLeases => [] });
is($st, 200, 'a failed transaction still answers 200');
ok(!$doc->{success}, 'with success:false');
is($doc->{error}, 'ack_rejected: consumer not found', 'and the rejected ack\'s error');
is(scalar @{ $doc->{results} }, 2, 'results up to the failing op');
usleep(300_000);
is(parked_pops($node), 1, 'the pop on out_c stays parked');
http_json($node, 'POST', '/api/v1/push', { items => [ { queue => 'out_c', payload => { from => 'push' } } ] });
my ($sc, $bc) = read_response($pc, 10);
is($sc, 200, 'a later push wakes it');
is(decode_json($bc)->{messages}[0]{data}{from}, 'push', 'and it never saw the rolled back push');
close $pc;

# ---- an unknown op type: 200 success:false
($st, $doc) = http_json($node, 'POST', '/api/v1/transaction',
	{ operations => [ { type => 'delete', queue => 'out_a' } ] });
is($st, 200, 'an unknown op type answers 200');
is($doc->{error}, 'unknown operation type: delete', 'with success:false and its error');

done_testing();
