# Maintenance mode over HTTP: push maintenance holds pushes and replays them
# when turned off; pop maintenance answers pops empty; every worker sees a
# change at once (the switch is read per request, dropped at commit by an
# invalidation); the switches outlive a restart.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Utils;
use QsHttp;
use Test::More;

my $node = qs_node('maint');

# Each request on a new connection: they spread over both workers.
sub fresh
{
	my ($method, $path, $body) = @_;
	return http_json($node, $method, $path, $body, { connection => 'close' });
}

my ($st, $doc) = fresh('GET', '/api/v1/system/maintenance');
is($st, 200, 'GET maintenance');
is($doc->{maintenanceMode}, JSON::PP::false, 'off by default');
ok(exists $doc->{bufferStats}{pendingCount}, 'with Queen\'s bufferStats');

($st, $doc) = fresh('POST', '/api/v1/system/maintenance', {});
is($st, 400, 'enabled is required');
is($doc->{error}, 'enabled (boolean) is required', 'Queen\'s message');
($st, $doc) = fresh('POST', '/api/v1/system/maintenance', { enabled => 'yes' });
is($st, 400, 'enabled must be a boolean');

fresh('POST', '/api/v1/push', { items => [ { queue => 'mq', payload => { n => 0 } } ] });
($st, $doc) = fresh('POST', '/api/v1/system/maintenance', { enabled => JSON::PP::true });
is($st, 200, 'push maintenance on');
is($doc->{maintenanceMode}, JSON::PP::true, 'answers the new mode');
like($doc->{message}, qr/buffered/, 'and says what it means');

for my $i (1 .. 4)
{
	($st, $doc) = fresh('POST', '/api/v1/push',
		{ items => [ { queue => 'mq', payload => { n => $i }, transactionId => "t$i" } ] });
	is($st, 201, "push $i during maintenance: 201");
	is($doc->[0]{status}, 'buffered', "push $i is buffered");
	is($doc->[0]{transactionId}, "t$i", "push $i echoes its transactionId");
}
is($node->safe_psql('postgres', 'SELECT count(*) FROM queen.push_buffer'), '4', 'four bodies held');
($st, $doc) = fresh('GET', '/api/v1/pop/queue/mq?batch=10&autoAck=true');
is($st, 200, 'pops still work during push maintenance');
is(scalar @{ $doc->{messages} }, 1, 'and see only what was pushed before');
($st, $doc) = fresh('GET', '/api/v1/system/maintenance');
is($doc->{bufferedMessages}, 4, 'bufferedMessages counts them');
($st, $doc) = fresh('GET', '/api/v1/status/buffers');
is($st, 200, 'GET /api/v1/status/buffers');
is($doc->{pending}, 4, 'pending in the buffer');

# the switch survives a restart
$node->restart;
wait_http($node);
($st, $doc) = fresh('GET', '/api/v1/system/maintenance');
is($doc->{maintenanceMode}, JSON::PP::true, 'still on after a restart');
($st, $doc) = fresh('POST', '/api/v1/push', { items => [ { queue => 'mq', payload => { n => 5 } } ] });
is($doc->[0]{status}, 'buffered', 'and pushes are still held');

($st, $doc) = fresh('POST', '/api/v1/system/maintenance', { enabled => JSON::PP::false });
is($st, 200, 'push maintenance off');
is($doc->{replayed}, 5, 'the buffer is replayed');
is($doc->{bufferedMessages}, 0, 'and empty');
($st, $doc) = fresh('GET', '/api/v1/pop/queue/mq?batch=10&autoAck=true');
is(join(',', map { $_->{data}{n} } @{ $doc->{messages} }), '1,2,3,4,5', 'replayed in order');
($st, $doc) = fresh('POST', '/api/v1/push', { items => [ { queue => 'mq', payload => { n => 6 } } ] });
is($doc->[0]{status}, 'queued', 'pushes go to the log again');

# pop maintenance
($st, $doc) = fresh('POST', '/api/v1/system/maintenance/pop', { enabled => JSON::PP::true });
is($st, 200, 'pop maintenance on');
is($doc->{popMaintenanceMode}, JSON::PP::true, 'answers the new mode');
for my $i (1 .. 4)
{
	($st) = fresh('GET', '/api/v1/pop/queue/mq?batch=10');
	is($st, 204, "pop $i during pop maintenance: 204 on every worker");
}
($st, $doc) = fresh('GET', '/api/v1/system/maintenance/pop');
is($doc->{popMaintenanceMode}, JSON::PP::true, 'GET .../pop says so');
($st, $doc) = fresh('POST', '/api/v1/push', { items => [ { queue => 'mq', payload => { n => 7 } } ] });
is($doc->[0]{status}, 'queued', 'pop maintenance does not hold pushes');
($st, $doc) = fresh('POST', '/api/v1/system/maintenance/pop', { enabled => JSON::PP::false });
($st, $doc) = fresh('GET', '/api/v1/pop/queue/mq?batch=10&autoAck=true');
is(join(',', map { $_->{data}{n} } @{ $doc->{messages} }), '6,7', 'pops serve again, nothing lost');

done_testing();
