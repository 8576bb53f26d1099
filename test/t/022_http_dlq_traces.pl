# The dead-letter, single-message and trace routes over HTTP: dead letters
# made the way a Queen client makes them (configure retryLimit 0, push, pop
# with a consumer group, ack failed with an error), GET /api/v1/dlq with
# every filter Queen's JS DLQBuilder sends, requeue and delete of single
# messages, POST and GET of traces; SQL and HTTP answer the same bodies.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = qs_node('dlq_traces');
my $uuid_re = qr/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
my $time_re = qr/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z$/;
my $nowhere = '01890a5d-ac96-774b-bcce-b302099a8057';

# A query-string value, encoded as URLSearchParams does.
sub enc
{
	my $s = shift;
	$s =~ s/([^A-Za-z0-9\-._~])/sprintf('%%%02X', ord $1)/ge;
	return $s;
}

sub qstr
{
	my (@kv) = @_;
	my @p;
	while (my ($k, $v) = splice(@kv, 0, 2)) { push @p, "$k=" . enc($v); }
	return @p ? '?' . join('&', @p) : '';
}

sub sql_lit
{
	my $s = shift;
	return 'NULL' unless defined $s;
	$s =~ s/'/''/g;
	return "'$s'";
}

sub keys_of { return [ sort keys %{ $_[0] } ]; }

my ($st, $doc, $hdr, $raw);

# ---- dead letters, the way a Queen client makes them
for my $q ('dq', 'dq2')
{
	($st, $doc) = http_json($node, 'POST', '/api/v1/configure',
		{ queue => $q, options => { retryLimit => 0, retryDelay => 0 } });
	is($st, 200, "configure $q answers 200");
	ok($doc->{configured}, "$q configured");
	is($doc->{options}{retryLimit}, 0, "$q has retryLimit 0");
}
($st, $doc) = http_json($node, 'POST', '/api/v1/push', { items => [
	(map { { queue => 'dq', partition => 'p1', transactionId => "m$_", payload => { n => $_, p => 'p1' } } } 0 .. 2),
	{ queue => 'dq', partition => 'p2', transactionId => 'm0', payload => { n => 0, p => 'p2' } },
	{ queue => 'dq2', partition => 'Default', transactionId => 'x0', payload => 'plain text' } ] });
is($st, 201, 'push answers 201');
is(scalar(grep { $_->{status} eq 'queued' } @$doc), 5, 'five messages queued');

my %popped;		# "queue/partition/txn" => the popped message

# Pop one message of a partition for a group, then ack it as the JS client
# does: {transactionId, partitionId, status, error, consumerGroup, leaseId}.
sub pop_ack
{
	my ($q, $part, $grp, $txn, $status, $error) = @_;
	my ($s, $d) = http_json($node, 'GET',
		"/api/v1/pop/queue/$q/partition/$part?batch=1&consumerGroup=$grp");
	is($s, 200, "$q/$part $grp: pop answers 200");
	my $m = $d->{messages}[0];
	is($m->{transactionId}, $txn, "$q/$part $grp: pops $txn");
	$popped{"$q/$part/$txn"} //= $m;
	($s, $d) = http_json($node, 'POST', '/api/v1/ack',
		{ transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		  status => $status, error => $error, consumerGroup => $grp, leaseId => $m->{leaseId} });
	is($s, 200, "$q/$part $grp: ack $status answers 200");
	ok($d->[0]{success}, "$q/$part $grp: ack $txn succeeded");
	return $d->[0];
}

my $ack = pop_ack('dq', 'p1', 'g1', 'm0', 'failed', 'm0 broke');
ok($ack->{dlq}, 'failed with retryLimit 0 goes to the DLQ at once');
pop_ack('dq', 'p1', 'g1', 'm1', 'failed', 'm1 broke');
$ack = pop_ack('dq', 'p1', 'g1', 'm2', 'completed', undef);
ok(!$ack->{dlq}, 'a completed ack is no dead letter');
pop_ack('dq', 'p1', 'g2', 'm0', 'failed', 'g2 gave up');
pop_ack('dq', 'p2', 'g1', 'm0', 'failed', 'p2 broke');
pop_ack('dq2', 'Default', 'g1', 'x0', 'failed', 'dq2 broke');

my $p1 = $popped{'dq/p1/m0'}{partitionId};
my $p2 = $popped{'dq/p2/m0'}{partitionId};
my $pd = $popped{'dq2/Default/x0'}{partitionId};
like($p1, $uuid_re, 'partition ids are uuids');

# ---- GET /api/v1/dlq
# The HTTP answer for the query, compared with queen.dlq(<sql args>).
sub dlq_both
{
	my ($label, $query, $sqlargs) = @_;
	my ($s, $d) = http_json($node, 'GET', '/api/v1/dlq' . $query);
	is($s, 200, "dlq $label: 200");
	is_deeply($d, json_sql($node, "queen.dlq($sqlargs)"), "dlq $label: SQL and HTTP give the same body");
	return $d;
}

# errors of a dlq answer, in answer order
sub errs { return join(' | ', map { $_->{errorMessage} } @{ $_[0]{messages} }); }

$doc = dlq_both('unfiltered', '', '');
is_deeply(keys_of($doc), [qw(messages pagination total)], 'answer keys');
is_deeply($doc->{pagination}, { limit => 100, offset => 0 }, 'default pagination');
is($doc->{total}, 5, 'total counts every dead letter');
is(errs($doc), 'dq2 broke | p2 broke | g2 gave up | m1 broke | m0 broke', 'newest failure first');
is_deeply(keys_of($doc->{messages}[0]),
	[qw(consumerGroup createdAt data errorMessage failedAt id partition partitionId producerSub
	    queue retryCount transactionId)], 'dead-letter fields');
my ($m1) = grep { $_->{errorMessage} eq 'm1 broke' } @{ $doc->{messages} };
my $pm1 = $popped{'dq/p1/m1'};
is_deeply($m1, {
	id => $pm1->{id}, transactionId => 'm1', partitionId => $p1, queue => 'dq', partition => 'p1',
	consumerGroup => 'g1', errorMessage => 'm1 broke', retryCount => 0, data => { n => 1, p => 'p1' },
	producerSub => undef, createdAt => $pm1->{createdAt}, failedAt => $m1->{failedAt} },
	'a dead letter: the popped message, its group, error and retry count');
like($m1->{failedAt}, $time_re, 'failedAt is a UTC time');
is($doc->{messages}[0]{data}, 'plain text', 'a string payload is kept');
my @failed = map { $_->{failedAt} } @{ $doc->{messages} };
is_deeply(\@failed, [ sort { $b cmp $a } @failed ], 'failedAt descending');

is(errs(dlq_both('queue dq', qstr(queue => 'dq'), "'dq'")),
	'p2 broke | g2 gave up | m1 broke | m0 broke', 'queue filter');
is(errs(dlq_both('queue dq2', qstr(queue => 'dq2'), "'dq2'")), 'dq2 broke', 'the other queue');
is(dlq_both('queue nope', qstr(queue => 'nope'), "'nope'")->{total}, 0, 'unknown queue: none');
is(errs(dlq_both('group g2', qstr(queue => 'dq', consumerGroup => 'g2'), "'dq', 'g2'")),
	'g2 gave up', 'consumerGroup filter');
is(errs(dlq_both('group g1', qstr(consumerGroup => 'g1'), "consumer_group => 'g1'")),
	'dq2 broke | p2 broke | m1 broke | m0 broke', 'consumerGroup alone');
is(errs(dlq_both('partition p2', qstr(queue => 'dq', partition => 'p2'), "'dq', partition => 'p2'")),
	'p2 broke', 'partition filter');
is(errs(dlq_both('queue dq g1 p1', qstr(queue => 'dq', consumerGroup => 'g1', partition => 'p1'),
	"'dq', 'g1', 'p1'")), 'm1 broke | m0 broke', 'queue, group and partition');
# from and to are inclusive bounds on failedAt
my $mid = $failed[2];
is(errs(dlq_both('from', qstr(queue => 'dq', from => $mid), "'dq', from_time => " . sql_lit($mid))),
	'p2 broke | g2 gave up', 'from is inclusive');
is(errs(dlq_both('to', qstr(to => $mid), 'to_time => ' . sql_lit($mid))),
	'g2 gave up | m1 broke | m0 broke', 'to is inclusive');
is(errs(dlq_both('from to', qstr(from => $failed[3], to => $failed[1]),
	'from_time => ' . sql_lit($failed[3]) . ', to_time => ' . sql_lit($failed[1]))),
	'p2 broke | g2 gave up | m1 broke', 'from and to');
is(dlq_both('from after to', qstr(from => $failed[0], to => $failed[4]),
	'from_time => ' . sql_lit($failed[0]) . ', to_time => ' . sql_lit($failed[4]))->{total},
	0, 'from after to: none');
# paging: limit and offset page for real, total counts every match
$doc = dlq_both('limit 2', qstr(limit => 2), 'lim => 2');
is(errs($doc), 'dq2 broke | p2 broke', 'limit 2: the newest two');
is_deeply([ $doc->{total}, $doc->{pagination} ], [ 5, { limit => 2, offset => 0 } ], 'limit 2: total and pagination');
$doc = dlq_both('limit 2 offset 2', qstr(limit => 2, offset => 2), 'lim => 2, off => 2');
is(errs($doc), 'g2 gave up | m1 broke', 'limit 2 offset 2: the next two');
$doc = dlq_both('offset 4', qstr(limit => 2, offset => 4), 'lim => 2, off => 4');
is(errs($doc), 'm0 broke', 'the last page');
$doc = dlq_both('offset past', qstr(offset => 10), 'off => 10');
is_deeply([ scalar @{ $doc->{messages} }, $doc->{total}, $doc->{pagination} ],
	[ 0, 5, { limit => 100, offset => 10 } ], 'offset past the end: no messages, the total');
# the JS DLQBuilder's whole query: queue, consumerGroup, partition, from, to, limit, offset
my $js = qstr(queue => 'dq', consumerGroup => 'g1', partition => 'p1', from => $failed[4],
	to => $failed[0], limit => 1, offset => 1);
$doc = dlq_both('DLQBuilder', $js,
	"'dq', 'g1', 'p1', " . sql_lit($failed[4]) . ', ' . sql_lit($failed[0]) . ', 1, 1');
is_deeply([ errs($doc), $doc->{total} ], [ 'm0 broke', 2 ], 'DLQBuilder query: second of two');
is(dlq_both('empty values', '?queue=&consumerGroup=&partition=&from=&to=&limit=&offset=', '')->{total},
	5, 'empty values are no filter');

for my $bad ('limit=abc', 'limit=-1', 'limit=10001', 'offset=-1', 'from=notadate', 'to=2026-13-45')
{
	($st, $doc) = http_json($node, 'GET', "/api/v1/dlq?$bad");
	is($st, 400, "dlq $bad: 400");
	ok(defined $doc->{error} && length $doc->{error}, "dlq $bad: an error message");
}
($st, $doc) = http_json($node, 'GET', '/api/v1/dlq?limit=-1');
is($doc->{error}, 'limit must be from 0 to 10000', 'bad limit: the function\'s message');
($st, $doc) = http_json($node, 'GET', '/api/v1/dlq?queue=%ff');
is($st, 400, 'a query value that is not valid text: 400');

# ---- POST /api/v1/messages/:p/:t/retry
($st, $doc) = http_json($node, 'POST', "/api/v1/messages/$p1/m1/retry");
is($st, 200, 'retry answers 200');
is_deeply(keys_of($doc), [qw(messageId partition partitionId queue success transactionId)], 'retry answer keys');
is_deeply([ @$doc{qw(success transactionId partitionId queue partition)} ],
	[ JSON::PP::true, 'm1', $p1, 'dq', 'p1' ], 'retry: the message requeued onto its partition');
like($doc->{messageId}, $uuid_re, 'retry names the new message');
isnt($doc->{messageId}, $pm1->{id}, 'a new message id');
my $requeued = $doc->{messageId};
is(errs(dlq_both('after retry', qstr(queue => 'dq', partition => 'p1'), "'dq', partition => 'p1'")),
	'g2 gave up | m0 broke', 'the dead letter is gone');
# g1's cursor passed m2; the requeued m1 is all it has left
($st, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/dq/partition/p1?batch=10&consumerGroup=g1');
is($st, 200, 'the requeued message pops');
is_deeply([ map { [ $_->{transactionId}, $_->{id} ] } @{ $doc->{messages} } ], [ [ 'm1', $requeued ] ],
	'once, under its new id and the same transaction id');
is_deeply($doc->{messages}[0]{data}, { n => 1, p => 'p1' }, 'with the original payload');
my $rm = $doc->{messages}[0];
($st, $doc) = http_json($node, 'POST', '/api/v1/ack',
	{ transactionId => 'm1', partitionId => $p1, status => 'completed', error => undef,
	  consumerGroup => 'g1', leaseId => $rm->{leaseId} });
is($st, 200, 'its ack answers 200');
ok($doc->[0]{success} && !$doc->[0]{dlq}, 'acked');
($st) = http_json($node, 'GET', '/api/v1/pop/queue/dq/partition/p1?batch=10&consumerGroup=g1');
is($st, 204, 'nothing left for g1');
($st, $doc) = http_json($node, 'POST', "/api/v1/messages/$p1/m1/retry");
is($st, 404, 'retry again answers 404');
is($doc->{error}, 'dead letter not found', 'its message');
($st) = http_json($node, 'POST', "/api/v1/messages/$nowhere/m0/retry");
is($st, 404, 'retry in an unknown partition answers 404');
($st) = http_json($node, 'POST', '/api/v1/messages/nope/m0/retry');
is($st, 400, 'retry with a partition id that is no uuid answers 400');

# ---- POST /api/v1/traces, with the JS client's body
my %trace_ids;
sub trace
{
	my ($label, $body, $code) = @_;
	my ($s, $d) = http_json($node, 'POST', '/api/v1/traces', $body);
	is($s, $code // 201, "trace $label: " . ($code // 201));
	return $d;
}
my $js_trace = sub {
	my ($pid, $txn, %f) = @_;
	return { transactionId => $txn, partitionId => $pid, consumerGroup => 'g1',
		traceNames => undef, eventType => 'info', data => {}, %f };
};
$doc = trace('null names', $js_trace->($p1, 'm2', data => { step => 1 }));
is_deeply(keys_of($doc), [qw(success traceId)], 'trace answer keys');
ok($doc->{success}, 'trace success');
like($doc->{traceId}, $uuid_re, 'traceId is a uuid');
$trace_ids{1} = $doc->{traceId};
$trace_ids{2} = trace('string name', $js_trace->($p1, 'm2', traceNames => 'flow-a',
	eventType => 'processing', data => { step => 2 }))->{traceId};
$trace_ids{3} = trace('names array', $js_trace->($p1, 'm2', traceNames => [ 'flow-b', 'flow-a', 'flow-b' ],
	eventType => 'error', data => 'text data'))->{traceId};
$trace_ids{4} = trace('a dead letter', $js_trace->($pd, 'x0', traceNames => ['flow-b'],
	consumerGroup => '', data => [ 1, 2 ]))->{traceId};
$trace_ids{5} = trace('a name with a space', $js_trace->($p2, 'm0', traceNames => ['flow c']))->{traceId};

for my $case (
	[ 'no transactionId', { partitionId => $p1, data => {} }, 'transactionId and partitionId are required' ],
	[ 'no partitionId', { transactionId => 'm2', data => {} }, 'transactionId and partitionId are required' ],
	[ 'empty transactionId', { transactionId => '', partitionId => $p1, data => {} },
		'transactionId and partitionId are required' ],
	[ 'no data', { transactionId => 'm2', partitionId => $p1, consumerGroup => 'g1' }, 'data is required' ])
{
	$doc = trace($case->[0], $case->[1], 400);
	is($doc->{error}, $case->[2], "trace $case->[0]: Queen's message");
}
trace('traceNames a number', $js_trace->($p1, 'm2', traceNames => 5), 400);
trace('partitionId no uuid', $js_trace->('nope', 'm2'), 400);
($st, $doc) = http_json($node, 'POST', '/api/v1/traces', '');
is($st, 400, 'trace without a body: 400');
$doc = trace('unknown partition', $js_trace->($nowhere, 'm2'), 404);
is($doc->{error}, 'message not found', 'unknown partition: message not found');
trace('unknown transaction', $js_trace->($p1, 'zzz'), 404);

# ---- GET /api/v1/traces/:p/:t
sub get_both
{
	my ($label, $path, $sql) = @_;
	my ($s, $d) = http_json($node, 'GET', $path);
	is($s, 200, "$label: 200");
	is_deeply($d, json_sql($node, $sql), "$label: SQL and HTTP give the same body");
	return $d;
}
$doc = get_both('traces of p1/m2', "/api/v1/traces/$p1/m2", "queen.traces('$p1', 'm2')");
is_deeply(keys_of($doc), ['traces'], 'traces answer keys');
is_deeply(keys_of($doc->{traces}[0]),
	[qw(consumerGroup createdAt data eventType id partitionId traceNames transactionId)], 'trace fields');
is_deeply([ map { [ @$_{qw(id transactionId partitionId consumerGroup eventType traceNames data)} ] }
		@{ $doc->{traces} } ],
	[ [ $trace_ids{1}, 'm2', $p1, 'g1', 'info', [], { step => 1 } ],
	  [ $trace_ids{2}, 'm2', $p1, 'g1', 'processing', ['flow-a'], { step => 2 } ],
	  [ $trace_ids{3}, 'm2', $p1, 'g1', 'error', [ 'flow-a', 'flow-b' ], 'text data' ] ],
	'oldest first; names deduplicated and sorted');
like($doc->{traces}[0]{createdAt}, $time_re, 'createdAt is a UTC time');
$doc = get_both('traces of the dead letter', "/api/v1/traces/$pd/x0", "queen.traces('$pd', 'x0')");
is_deeply([ @{ $doc->{traces}[0] }{qw(consumerGroup data)} ], [ '__QUEUE_MODE__', [ 1, 2 ] ],
	'an empty consumerGroup is queue mode');
is_deeply(get_both('traces of an unknown message', "/api/v1/traces/$p1/zzz", "queen.traces('$p1', 'zzz')"),
	{ traces => [] }, 'no traces');
($st) = http_json($node, 'GET', '/api/v1/traces/nope/m2');
is($st, 400, 'traces with a partition id that is no uuid: 400');

# ---- GET /api/v1/traces/by-name/:name
$doc = get_both('by-name flow-a', '/api/v1/traces/by-name/flow-a', "queen.traces_by_name('flow-a')");
is_deeply(keys_of($doc), [qw(pagination total traces)], 'by-name answer keys');
is_deeply([ $doc->{total}, $doc->{pagination} ], [ 2, { limit => 100, offset => 0 } ], 'by-name total and pagination');
is_deeply(keys_of($doc->{traces}[0]),
	[qw(consumerGroup createdAt data eventType id partitionId partitionName queueName traceNames transactionId)],
	'by-name trace fields');
is_deeply([ map { $_->{id} } @{ $doc->{traces} } ], [ @trace_ids{2, 3} ], 'by-name: oldest first');
is_deeply([ @{ $doc->{traces}[0] }{qw(queueName partitionName)} ], [ 'dq', 'p1' ], 'with queue and partition names');
$doc = get_both('by-name flow-b', '/api/v1/traces/by-name/flow-b', "queen.traces_by_name('flow-b')");
is_deeply([ map { "$_->{queueName}/$_->{partitionName}/$_->{transactionId}" } @{ $doc->{traces} } ],
	[ 'dq/p1/m2', 'dq2/Default/x0' ], 'by-name spans queues');
$doc = get_both('by-name flow-b paged', '/api/v1/traces/by-name/flow-b?limit=1&offset=1',
	"queen.traces_by_name('flow-b', 1, 1)");
is_deeply([ (map { $_->{id} } @{ $doc->{traces} }), $doc->{total}, $doc->{pagination} ],
	[ $trace_ids{4}, 2, { limit => 1, offset => 1 } ], 'by-name limit and offset');
$doc = get_both('by-name flow c', '/api/v1/traces/by-name/flow%20c', "queen.traces_by_name('flow c')");
is_deeply([ map { $_->{id} } @{ $doc->{traces} } ], [ $trace_ids{5} ], 'a percent-encoded name is decoded');
is_deeply(get_both('by-name nope', '/api/v1/traces/by-name/nope', "queen.traces_by_name('nope')"),
	{ traces => [], total => 0, pagination => { limit => 100, offset => 0 } }, 'an unknown name');
($st) = http_json($node, 'GET', '/api/v1/traces/by-name/flow-a?limit=-1');
is($st, 400, 'by-name bad limit: 400');
($st) = http_json($node, 'GET', '/api/v1/traces/by-name/flow-a?offset=x');
is($st, 400, 'by-name bad offset: 400');
($st, $doc) = http_json($node, 'GET', '/api/v1/traces/by-name/%ff');
is($st, 400, 'a path parameter with invalid UTF-8: 400');
is($doc->{error}, 'name must be valid UTF-8 without NUL bytes', 'its message names the parameter');

# ---- GET /api/v1/traces/names
$doc = get_both('names', '/api/v1/traces/names', 'queen.trace_names()');
is_deeply(keys_of($doc), [qw(pagination total trace_names)], 'names answer keys');
is_deeply([ $doc->{total}, $doc->{pagination} ], [ 3, { limit => 50, offset => 0 } ], 'names total and pagination');
is_deeply(keys_of($doc->{trace_names}[0]), [qw(last_seen message_count trace_count trace_name)], 'name fields');
is_deeply([ map { [ @$_{qw(trace_name trace_count message_count)} ] } @{ $doc->{trace_names} } ],
	[ [ 'flow c', 1, 1 ], [ 'flow-b', 2, 2 ], [ 'flow-a', 2, 1 ] ], 'most recently seen first, with counts');
like($doc->{trace_names}[0]{last_seen}, $time_re, 'last_seen is a UTC time');
$doc = get_both('names paged', '/api/v1/traces/names?limit=1&offset=1', 'queen.trace_names(1, 1)');
is_deeply([ (map { $_->{trace_name} } @{ $doc->{trace_names} }), $doc->{total} ], [ 'flow-b', 3 ], 'names paged');
($st) = http_json($node, 'GET', '/api/v1/traces/names?limit=-5');
is($st, 400, 'names bad limit: 400');

# ---- DELETE /api/v1/messages/:p/:t
# a live message: nothing to delete, the same answer over SQL
($st, $doc) = http_json($node, 'DELETE', "/api/v1/messages/$p1/m2");
is($st, 200, 'delete of a live message answers 200');
is_deeply(keys_of($doc), [qw(message partitionId success transactionId)], 'delete answer keys');
ok(!$doc->{success}, 'a live message is not deleted');
is($doc->{message}, 'message is not dead-lettered: messages in the log cannot be deleted one by one',
	'and says why');
is_deeply($doc, json_sql($node, "queen.delete_message('$p1', 'm2')"), 'delete: SQL and HTTP give the same body');
# m0 of p1: dead-lettered by g1 and g2, both rows go
($st, $doc) = http_json($node, 'DELETE', "/api/v1/messages/$p1/m0");
is($st, 200, 'delete of a dead letter answers 200');
is_deeply($doc, { success => JSON::PP::true, partitionId => $p1, transactionId => 'm0',
		message => '2 dead letters deleted' }, 'both groups\' dead letters deleted');
is(dlq_both('after delete', qstr(queue => 'dq', partition => 'p1'), "'dq', partition => 'p1'")->{total},
	0, 'no dead letter left on p1');
($st, $doc) = http_json($node, 'DELETE', "/api/v1/messages/$p2/m0");
is_deeply([ $st, $doc->{success}, $doc->{message} ], [ 200, JSON::PP::true, 'dead letter deleted' ],
	'a single dead letter deleted');
($st, $doc) = http_json($node, 'DELETE', "/api/v1/messages/$p1/m0");
is_deeply([ $st, $doc->{success} ], [ 200, JSON::PP::false ], 'delete again: 200, success false');
($st, $doc) = http_json($node, 'DELETE', "/api/v1/messages/$nowhere/m0");
is_deeply([ $st, $doc->{success}, $doc->{message} ], [ 200, JSON::PP::false, 'message not found' ],
	'an unknown partition: 200, message not found');
($st) = http_json($node, 'DELETE', "/api/v1/messages/$p1/%ff");
is($st, 400, 'delete with an invalid UTF-8 transaction id: 400');
$doc = dlq_both('at the end', '', '');
is(errs($doc), 'dq2 broke', 'one dead letter left');
# the traces of the deleted dead letters' messages stay (the messages are in the log)
($st, $doc) = http_json($node, 'GET', "/api/v1/traces/$p2/m0");
is(scalar @{ $doc->{traces} }, 1, 'traces outlive dead-letter deletes');

# every route counted under its label
my (undef, $metrics) = http($node, 'GET', '/metrics');
for my $r ([ 'dlq', 200 ], [ 'dlq', 400 ], [ 'retry_message', 200 ], [ 'retry_message', 404 ],
	[ 'delete_message', 200 ], [ 'traces', 201 ], [ 'traces', 200 ], [ 'traces_by_name', 200 ],
	[ 'trace_names', 200 ])
{
	like($metrics, qr/queen_streams_http_requests_total\{route="$r->[0]",code="$r->[1]"\} \d+/,
		"metrics count $r->[0] $r->[1]");
}

$node->stop;
done_testing();
