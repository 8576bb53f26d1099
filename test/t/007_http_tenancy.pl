# Tenant isolation over HTTP with queen_streams.tenancy = header (facts §10,
# §12; issue 5 "Tenant isolation, end to end"): tenants A, B and C, named by
# the x-queen-tenant header, and the default tenant (no header). The same
# query, queue and sink names under several tenants are independent; another
# tenant's partition, query, lease or queue can neither be read, written,
# woken nor counted; the streams quota ladder; reset wipes only the caller's
# state.
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

my $node = qs_node('tenancy', "queen_streams.tenancy = header\n");

my $A = 'aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa';
my $B = 'bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb';
my $C = 'cccccccc-cccc-4ccc-8ccc-cccccccccccc';
my $D = '00000000-0000-0000-0000-000000000001';    # the default tenant: no header
my %tname = ($A => 'A', $B => 'B', $C => 'C', $D => 'default');
my $NOT_FOUND = '{"error":"not found"}';
my $BAD_TENANT = 'invalid x-queen-tenant header (must be a UUID)';

# A request as tenant $t (the default tenant sends no header).
sub as
{
	my ($t, $method, $path, $body) = @_;
	my $h = ($t eq $D) ? {} : { 'x-queen-tenant' => $t };
	return http_json($node, $method, $path, $body, $h);
}

sub sql { return $node->safe_psql('postgres', $_[0]); }

# Everything the routes could write, as one string, to compare before/after.
sub snapshot
{
	return sql(q{
		SELECT concat_ws(E'\n',
		  (SELECT string_agg(concat_ws('|', tenant_id, name, lease_time), ',' ORDER BY tenant_id, name)
		     FROM queen.queues),
		  (SELECT string_agg(concat_ws('|', id, name, last_offset), ',' ORDER BY id)
		     FROM queen.log_partitions),
		  (SELECT string_agg(concat_ws('|', partition_id, base_offset, end_offset, md5(blob)), ','
		                     ORDER BY partition_id, base_offset) FROM queen.log_segments),
		  (SELECT string_agg(concat_ws('|', partition_id, base_offset, end_offset), ','
		                     ORDER BY partition_id, base_offset) FROM queen.log_txns),
		  (SELECT string_agg(concat_ws('|', partition_id, consumer_group, committed, batch_end,
		                               worker_id, lease_expires_at, total_consumed), ','
		                     ORDER BY partition_id, consumer_group) FROM queen.log_consumers),
		  (SELECT string_agg(concat_ws('|', query_id, partition_id, key, value, updated_at), ','
		                     ORDER BY query_id, partition_id, key) FROM queen_streams.state),
		  (SELECT string_agg(concat_ws('|', id, tenant_id, name, config_hash, updated_at), ','
		                     ORDER BY id) FROM queen_streams.queries),
		  (SELECT count(*) FROM queen.log_dlq))});
}

# One partition's numbers: "last_offset/segments" of queue $q of tenant $t ("none": no such partition).
sub partition_of
{
	my ($t, $q, $p) = @_;
	$p //= 'Default';
	return sql(qq{
		SELECT coalesce((
		  SELECT p.last_offset || '/' || (SELECT count(*) FROM queen.log_segments s WHERE s.partition_id = p.id)
		    FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
		   WHERE q.tenant_id = '$t' AND q.name = '$q' AND p.name = '$p'), 'none')});
}

sub tenants_of_queue
{
	my ($q) = @_;
	return join(',', map { $tname{$_} } sort split /,/,
		sql("SELECT string_agg(tenant_id::text, ',') FROM queen.queues WHERE name = '$q'"));
}

sub cursor_of
{
	my ($pid) = @_;
	return sql("SELECT format('%s|%s|%s|%s', committed, batch_end, worker_id, lease_expires_at)"
		  . " FROM queen.log_consumers WHERE partition_id = '$pid' AND consumer_group = 'streams.counts'");
}

# ====================================================================== the header
my ($st, $doc, $hdr, $raw);
for my $bad ('nope', 'aaaaaaaaaaaa4aaa8aaaaaaaaaaaaaaa', "{$A}", "${A}0",
	'aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaag', 'aaaaaaaa_aaaa-4aaa-8aaa-aaaaaaaaaaaa')
{
	($st, $doc, undef, $raw) = http_json($node, 'POST', '/api/v1/push',
		{ items => [ { queue => 'badhdr', payload => {} } ] }, { 'x-queen-tenant' => $bad });
	is($st, 400, "x-queen-tenant '$bad': push answers 400");
	is($raw, qq({"error":"$BAD_TENANT"}), "x-queen-tenant '$bad': the exact error body");
}

# Two tenant headers (a client's and a proxy's): neither is trusted.
{
	my ($st, $doc) = http_json($node, 'POST', '/api/v1/push',
		{ items => [ { queue => 'twohdr', payload => {} } ] }, { 'x-queen-tenant' => [ $A, $B ] });
	is($st, 400, 'two x-queen-tenant headers: 400');
	is($doc->{error}, $BAD_TENANT, 'two x-queen-tenant headers: the header error');
	is(sql(q{SELECT count(*) FROM queen.queues WHERE name = 'twohdr'}), '0', 'two x-queen-tenant headers: nothing written');
}
my %bad_routes = (
	'GET /api/v1/pop/queue/badhdr' => undef,
	'POST /api/v1/ack' => { transactionId => 't', partitionId => $A, leaseId => 'l' },
	'POST /api/v1/ack/batch' => { acknowledgments => [] },
	'POST /api/v1/lease/some-lease/extend' => { seconds => 10 },
	'POST /streams/v1/queries' => { name => 'q', source_queue => 's', config_hash => 'h' },
	'POST /streams/v1/state/get' => { query_id => $A, partition_id => $A },
	'POST /streams/v1/cycle' => { query_id => $A, partition_id => $A },
	'POST /api/v1/configure' => { queue => 'badhdr', options => {} },
	'DELETE /api/v1/resources/queues/badhdr' => undef);
for my $r (sort keys %bad_routes)
{
	my ($m, $p) = split / /, $r;
	($st, $doc) = http_json($node, $m, $p, $bad_routes{$r}, { 'x-queen-tenant' => 'not-a-uuid' });
	is($st, 400, "$r with a malformed tenant answers 400");
	is($doc->{error}, $BAD_TENANT, "$r: its message");
}
is(sql('SELECT count(*) FROM queen.queues') . '/' . sql('SELECT count(*) FROM queen_streams.queries'),
	'0/0', 'a malformed tenant header wrote nothing');

# upper case names the same tenant; an empty header is the default tenant
($st) = http_json($node, 'POST', '/api/v1/push',
	{ items => [ { queue => 'upper', payload => { via => 'upper' } } ] }, { 'x-queen-tenant' => uc $A });
is($st, 201, 'an upper-case tenant UUID is accepted');
($st, $doc) = as($A, 'GET', '/api/v1/pop/queue/upper?autoAck=true');
is($st, 200, 'the same tenant in lower case pops it');
is($doc->{messages}[0]{data}{via}, 'upper', 'the upper-case push');
($st) = http_json($node, 'POST', '/api/v1/push',
	{ items => [ { queue => 'emptyhdr', payload => {} } ] }, { 'x-queen-tenant' => '' });
is($st, 201, 'an empty tenant header is accepted');
is(tenants_of_queue('upper') . ' ' . tenants_of_queue('emptyhdr'), 'A default',
	'stored under A and under the default tenant');

($st, $doc) = http_json($node, 'POST', '/api/v1/push',
	{ items => [ { queue => 'ka', payload => { who => 'B' } } ] }, { 'X-Queen-Tenant' => $B });
is($st, 201, 'the header name is case-insensitive (X-Queen-Tenant)');
as($D, 'POST', '/api/v1/push', { items => [ { queue => 'ka', payload => { who => 'default' } } ] });
is(tenants_of_queue('ka'), 'default,B', 'ka exists under B and the default tenant');

# the tenant is per request, not per connection: three requests on one keep-alive connection
{
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
		PeerPort => $node->{qs_http_port}, Proto => 'tcp') or die "connect: $!";
	my @seen;
	for my $t ($B, $D, $C)
	{
		my $h = $t eq $D ? '' : "x-queen-tenant: $t\r\n";
		print $s "GET /api/v1/pop/queue/ka?autoAck=true HTTP/1.1\r\nHost: x\r\n$h\r\n";
		my ($kst, $kbody) = tenant_response({ s => $s, t0 => time }, 10);
		my $who = ($kst // 0) == 200 ? eval { decode_json($kbody)->{messages}[0]{data}{who} } : '';
		push @seen, ($kst // 'none') . ':' . ($who // '?');
	}
	close $s;
	is(join(' ', @seen), '200:B 200:default 204:',
		'one connection: B pops B\'s, no header pops the default tenant\'s, C pops nothing');
}

# ====================================================================== same names, several tenants
sql("INSERT INTO queen_streams.quota (tenant_id) VALUES ('$A'), ('$B')");
my $reg = { name => 'counts', source_queue => 'events', sink_queue => 'events.out', config_hash => 'h1' };
my %qid;
for my $t ($A, $B, $D)
{
	($st, $doc) = as($t, 'POST', '/streams/v1/queries', $reg);
	is($st, 200, "$tname{$t}: registering 'counts' answers 200");
	is($doc->{fresh}, JSON::PP::true, "$tname{$t}: fresh");
	$qid{$t} = $doc->{query_id};
	is(sql("SELECT tenant_id FROM queen_streams.queries WHERE id = '$qid{$t}'"), $t,
		"$tname{$t}: its query_id is stored under its tenant");
}
is(scalar(keys %{ { map { $_ => 1 } values %qid } }), 3, 'three distinct query_ids for one name');
($st, $doc) = as($A, 'POST', '/streams/v1/queries', $reg);
is($st . ' ' . ($doc->{fresh} ? 'fresh' : 'existing'), '200 existing', 'A re-registers: not fresh');
is($doc->{query_id}, $qid{$A}, 'A re-registering gets back its own query_id');
($st, $doc) = as($B, 'POST', '/streams/v1/queries', { %$reg, config_hash => 'h-other' });
is($st, 409, 'B with a changed config_hash answers 409');
is($doc->{query_id}, $qid{$B}, 'the 409 reveals B\'s own query_id');
ok(!exists $doc->{denied}, 'a conflict is not a denial');
is(sql("SELECT config_hash FROM queen_streams.queries WHERE name = 'counts' ORDER BY tenant_id"),
	"h1\nh1\nh1", 'no tenant\'s config_hash changed');

# pushes with the same queue, partition and transaction ids
for my $t ($A, $B, $D)
{
	my $n = { $A => 3, $B => 2, $D => 1 }->{$t};
	($st, $doc) = as($t, 'POST', '/api/v1/push',
		{ items => [ map { { queue => 'events', partition => 'p1', transactionId => "tx-$_",
			payload => { t => $tname{$t}, n => $_ } } } 1 .. $n ] });
	is($st, 201, "$tname{$t}: push to events/p1");
	is(join(',', map { $_->{status} } @$doc), join(',', ('queued') x $n),
		"$tname{$t}: the same transaction ids are not duplicates of another tenant's");
}
is(tenants_of_queue('events'), 'default,A,B', 'one queue named events per tenant');
is(join(' ', map { partition_of($_, 'events', 'p1') } $A, $B, $D), '2/1 1/1 0/1',
	'each tenant\'s events/p1 holds only its own pushes (last_offset/segments)');

my %lease;    # per tenant: the leased batch of events/p1
for my $t ($B, $A, $D)
{
	($st, $doc) = as($t, 'GET', '/api/v1/pop/queue/events/partition/p1?batch=10&consumerGroup=streams.counts');
	is($st, 200, "$tname{$t}: pops events/p1");
	is(join(',', map { $_->{data}{t} } @{ $doc->{messages} }),
		join(',', ($tname{$t}) x { $A => 3, $B => 2, $D => 1 }->{$t}),
		"$tname{$t}: only its own messages");
	$lease{$t} = { pid => $doc->{partitionId}, lease => $doc->{leaseId},
		last => $doc->{messages}[-1]{transactionId}, n => scalar @{ $doc->{messages} } };
}
is(scalar(keys %{ { map { $_->{pid} => 1 } values %lease } }), 3, 'three distinct partition ids');
($st) = as($B, 'GET', '/api/v1/pop/queue/events?batch=10&consumerGroup=streams.counts&partitions=10');
is($st, 204, 'B pops nothing more: its batch is leased and A\'s messages are not B\'s');
($st) = as($C, 'GET', '/api/v1/pop/queue/events?batch=10&partitions=10');
is($st, 204, 'C, with no queue of that name, pops nothing');

# ====================================================================== another tenant's lease and partition
my ($pA, $lA) = ($lease{$A}{pid}, $lease{$A}{lease});
my $before = snapshot();
my $cursorA = cursor_of($pA);
like($cursorA, qr/^-1\|2\|\Q$lA\E\|/, 'A holds a lease on offsets 0..2');

my $ackA = { transactionId => $lease{$A}{last}, partitionId => $pA, leaseId => $lA, status => 'completed' };
for my $t ($B, $C, $D)
{
	($st, $doc) = as($t, 'POST', '/api/v1/ack', $ackA);
	is($st, 200, "$tname{$t}: an ack of A's partition and lease answers 200");
	is($doc->[0]{success}, JSON::PP::false, "$tname{$t}: success false");
	is($doc->[0]{error}, 'partition not owned by tenant', "$tname{$t}: partition not owned by tenant");
}
($st, $doc) = as($B, 'POST', '/api/v1/ack/batch',
	{ consumerGroup => 'streams.counts', acknowledgments => [ map { { %$ackA, transactionId => "tx-$_" } } 1 .. 3 ] });
is($st, 200, 'B: a batch ack of A\'s messages answers 200');
is(join(',', map { $_->{error} } @$doc), join(',', ('partition not owned by tenant') x 3),
	'B: every item is partition not owned by tenant');
is(cursor_of($pA), $cursorA, 'A\'s cursor and lease are unchanged');

for my $t ($B, $D)
{
	($st, $doc) = as($t, 'POST', "/api/v1/lease/$lA/extend", { seconds => 3600 });
	is($st, 200, "$tname{$t}: extending A's lease answers 200");
	is($doc->{renewed}, 0, "$tname{$t}: renews 0 leases");
	is($doc->{success}, JSON::PP::false, "$tname{$t}: success false");
}
is(cursor_of($pA), $cursorA, 'A\'s lease expiry is unchanged');

for my $t ($B, $C, $D)
{
	my %seen;
	for my $q (grep { defined && !$seen{$_}++ } $qid{$A}, $qid{$t})
	{
		my $whose = $q eq $qid{$A} ? 'A\'s' : 'its own';
		($st, undef, undef, $raw) = as($t, 'POST', '/streams/v1/state/get',
			{ query_id => $q, partition_id => $pA });
		is("$st $raw", "404 $NOT_FOUND", "$tname{$t}: state/get of A's partition with $whose query is 404 not found");
		($st, undef, undef, $raw) = as($t, 'POST', '/streams/v1/cycle',
			{ query_id => $q, partition_id => $pA, consumer_group => 'streams.counts',
			  state_ops => [ { type => 'upsert', key => 'k', value => { from => $tname{$t} } } ],
			  push_items => [ { queue => 'events.out', payload => { from => $tname{$t} } },
				{ queue => "new.sink.$tname{$t}", payload => {} } ],
			  ack => { transactionId => $lease{$A}{last}, leaseId => $lA, status => 'completed', count => 3 } });
		is("$st $raw", "404 $NOT_FOUND", "$tname{$t}: cycle on A's partition with $whose query and lease is 404 not found");
	}
}
my $nopart = '0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f';
for my $route ('state/get', 'cycle')
{
	($st, undef, undef, $raw) = as($A, 'POST', "/streams/v1/$route", { query_id => $qid{$A}, partition_id => $nopart });
	is("$st $raw", "404 $NOT_FOUND", "$route: a partition that does not exist is the same 404");
}
is(snapshot(), $before, 'nothing was written: queues, partitions, segments, cursors, state, queries');
is(sql("SELECT count(*) FROM queen.queues WHERE name LIKE 'new.sink.%'"), '0', 'no sink queue was auto-created');

($st, $doc) = as($A, 'POST', "/api/v1/lease/$lA/extend", { seconds => 120 });
is($doc->{renewed}, 1, 'A itself renews its lease');

# ====================================================================== another tenant's query on one's own partition
my ($pB, $lB) = ($lease{$B}{pid}, $lease{$B}{lease});
# a row of A's query on B's partition, planted over SQL: only the tenant filter hides it
sql("INSERT INTO queen_streams.state (query_id, partition_id, key, value)"
	  . " VALUES ('$qid{$A}', '$pB', 'planted', '{\"from\":\"A\"}')");
($st, $doc) = as($B, 'POST', '/streams/v1/state/get', { query_id => $qid{$A}, partition_id => $pB });
is($st, 200, 'B: state/get of A\'s query on B\'s partition answers 200');
is_deeply($doc, { success => JSON::PP::true, rows => [] }, 'B: it reads as empty rows');
($st, $doc) = as($B, 'POST', '/streams/v1/state/get',
	{ query_id => $qid{$A}, partition_id => $pB, key_prefix => 'pl', keys => ['planted'] });
is_deeply($doc->{rows}, [], 'B: still empty with filters naming the row');
is(call_sql($node, 'queen_streams.state_get', { query_id => $qid{$A}, partition_id => $pB }, "'$A'")->{rows}[0]{key},
	'planted', 'the row is there for A over SQL: the tenant filter is what hides it');
($st, undef, undef, $raw) = as($A, 'POST', '/streams/v1/state/get', { query_id => $qid{$A}, partition_id => $pB });
is("$st $raw", "404 $NOT_FOUND", 'A over HTTP: B\'s partition is 404');
my $unknown_q = '0193f0c4-0000-7000-8000-000000000000';
($st, $doc) = as($B, 'POST', '/streams/v1/state/get', { query_id => $unknown_q, partition_id => $pB });
is_deeply([ $st, $doc ], [ 200, { success => JSON::PP::true, rows => [] } ],
	'an unknown query reads exactly the same');

$before = snapshot();
my $cursorB = cursor_of($pB);
for my $q ($qid{$A}, $qid{$D}, $unknown_q)
{
	($st, $doc) = as($B, 'POST', '/streams/v1/cycle',
		{ query_id => $q, partition_id => $pB, consumer_group => 'streams.counts',
		  state_ops => [ { type => 'upsert', key => 'k', value => { from => 'B' } } ],
		  push_items => [ { queue => 'events.out', payload => { from => 'B' } } ],
		  ack => { transactionId => $lease{$B}{last}, leaseId => $lB, status => 'completed', count => 2 } });
	my %owner = reverse %qid;
	my $what = $q eq $unknown_q ? 'an unknown query' : "$tname{$owner{$q}}'s query";
	is($st, 200, "B: a cycle with $what on B's partition answers 200");
	is_deeply([ @$doc{qw(success error state_ops_applied push_results ack_result queueName)} ],
		[ JSON::PP::false, 'query not found', 0, [], undef, 'events' ],
		"B: $what is success:false, query not found, nothing applied");
}
is(snapshot(), $before, 'nothing was written by the refused cycles');
is(cursor_of($pB), $cursorB, 'B\'s cursor and lease are unchanged');
sql("DELETE FROM queen_streams.state WHERE key = 'planted'");

# ====================================================================== cycles: state and sinks per tenant
($st) = as($B, 'POST', '/api/v1/push', { items => [ { queue => 'events.out', payload => { from => 'B-direct' } } ] });
is($st, 201, 'B pushes to its own events.out first');
is(partition_of($B, 'events.out'), '0/1', 'B\'s events.out: one message, one segment');

my %value = ($A => 3, $B => 2, $D => 1);
for my $t ($A, $B, $D)
{
	my $l = $lease{$t};
	my @sink = $t eq $D ? () : map { { queue => 'events.out', payload => { from => "$tname{$t}-cycle", n => $_ } } }
	  1 .. ($t eq $A ? 2 : 1);
	my $outB = partition_of($B, 'events.out');
	($st, $doc) = as($t, 'POST', '/streams/v1/cycle',
		{ query_id => $qid{$t}, partition_id => $l->{pid}, consumer_group => 'streams.counts',
		  state_ops => [ { type => 'upsert', key => 'k', value => { acc => $value{$t}, t => $tname{$t} } } ],
		  push_items => \@sink,
		  ack => { transactionId => $l->{last}, leaseId => $l->{lease}, status => 'completed', count => $l->{n} } });
	is($st, 200, "$tname{$t}: its cycle answers 200");
	is($doc->{success}, JSON::PP::true, "$tname{$t}: its cycle commits");
	is($doc->{ack_result}{count}, $l->{n}, "$tname{$t}: its source batch is acked");
	is(partition_of($B, 'events.out'), $outB, "$tname{$t}'s cycle leaves B's events.out as it was")
	  unless $t eq $B;
	if ($t eq $A)
	{
		is(partition_of($A, 'events.out'), '1/1', 'A\'s sink push created A\'s own events.out (2 messages, 1 segment)');
		is(tenants_of_queue('events.out'), 'A,B', 'the sink queue was auto-created under A');
	}
}
is(partition_of($B, 'events.out'), '1/2', 'B\'s cycle grew only B\'s events.out');
is(partition_of($A, 'events.out'), '1/1', 'A\'s events.out is as A\'s cycle left it');
is(partition_of($D, 'events.out'), 'none', 'the default tenant has no events.out');
for my $t ($A, $B, $D)
{
	($st, $doc) = as($t, 'POST', '/streams/v1/state/get', { query_id => $qid{$t}, partition_id => $lease{$t}{pid} });
	is_deeply([ map { { key => $_->{key}, value => $_->{value} } } @{ $doc->{rows} } ],
		[ { key => 'k', value => { acc => $value{$t}, t => $tname{$t} } } ],
		"$tname{$t}: state/get reads its own row 'k'");
	is(cursor_of($lease{$t}{pid}), ($value{$t} - 1) . '|||', "$tname{$t}: its cursor committed its batch");
}
($st, $doc) = as($B, 'GET', '/api/v1/pop/queue/events.out?batch=10&autoAck=true');
is(join(',', map { $_->{data}{from} } @{ $doc->{messages} }), 'B-direct,B-cycle', 'B pops only B\'s sink messages');
($st, $doc) = as($A, 'GET', '/api/v1/pop/queue/events.out?batch=10&autoAck=true');
is(join(',', map { $_->{data}{from} } @{ $doc->{messages} }), 'A-cycle,A-cycle', 'A pops only A\'s sink messages');
($st) = as($D, 'GET', '/api/v1/pop/queue/events.out?batch=10&autoAck=true');
is($st, 204, 'the default tenant pops nothing from events.out');

# ====================================================================== counters per (tenant, queue)
my %expect = (
	"$B|ka" => '1/1/0/0/0/0',
	"$D|ka" => '1/1/0/0/0/0',
	"$A|upper" => '1/1/0/0/0/0',
	"$D|emptyhdr" => '1/0/0/0/0/0',
	"$A|events" => '3/3/3/0/1/0',
	"$B|events" => '2/2/2/0/1/3',    # three cycles refused as query not found
	"$D|events" => '1/1/1/0/1/0',
	"$A|events.out" => '2/2/0/0/0/0',
	"$B|events.out" => '2/2/0/0/0/0');
my %got = map { my ($k, $v) = split / /; ($k => $v) } split /\n/, sql(q{
	SELECT tenant_id || '|' || queue || ' ' || concat_ws('/', pushed, popped, acked, nacked, cycles, cycles_failed)
	  FROM queen_streams.metrics});
is_deeply(\%got, \%expect,
	'queen_streams.metrics: one row per (tenant, queue), nothing of one tenant counted on another\'s row');
# GET /metrics shows each tenant its own queues only.
my %metrics_as;
$metrics_as{$_} = (as($_, 'GET', '/metrics'))[3] for ($A, $B, $C, $D);
for my $t ($A, $B, $C, $D)
{
	for my $o (grep { $_ ne $t } ($A, $B, $C, $D))
	{
		unlike($metrics_as{$t}, qr/tenant="\Q$o\E"/, "GET /metrics as $tname{$t} shows nothing of $tname{$o}");
	}
}
for my $k (sort keys %expect)
{
	my ($t, $q) = split /\|/, $k;
	my $metrics = $metrics_as{$t};
	my @n = split m{/}, $expect{$k};
	my $i = 0;
	for my $m (qw(pushed_messages popped_messages acked_messages nacked_messages cycles failed_cycles))
	{
		my $n = $n[ $i++ ];
		my $line = "queen_streams_queue_${m}_total{tenant=\"$t\",queue=\"$q\"}";
		if ($n)
		{
			like($metrics, qr/^\Q$line\E $n$/m, "GET /metrics: $line $n");
		}
		else
		{
			unlike($metrics, qr/^\Q$line\E /m, "GET /metrics: no $line");
		}
	}
}
unlike($metrics_as{$C}, qr/tenant=/, 'GET /metrics: nothing counted for C');

# ====================================================================== wake-ups stay within the tenant
sub tenant_pop
{
	my ($t, $path) = @_;
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
		PeerPort => $node->{qs_http_port}, Proto => 'tcp') or die "connect: $!";
	my $h = $t eq $D ? '' : "x-queen-tenant: $t\r\n";
	print $s "GET $path HTTP/1.1\r\nHost: x\r\n${h}Connection: close\r\n\r\n";
	return { s => $s, t0 => time };
}

# One complete response: (status, body, seconds since the request was sent).
sub tenant_response
{
	my ($p, $timeout) = @_;
	my $s = $p->{s};
	my $buf = '';
	$s->blocking(0);
	while (time - $p->{t0} < $timeout)
	{
		my $n = sysread($s, $buf, 65536, length $buf);
		last if defined $n && $n == 0;
		if (!defined $n) { usleep(1000); next; }
		if ($buf =~ /^HTTP\/1\.1 (\d+).*?\r\n\r\n(.*)$/s)
		{
			my ($status, $body) = ($1, $2);
			my ($len) = $buf =~ /Content-Length: (\d+)/i;
			return ($status, $body, time - $p->{t0}) if length($body) >= ($len // 0);
		}
	}
	if ($buf =~ /^HTTP\/1\.1 (\d+).*?\r\n\r\n(.*)$/s)
	{
		return ($1, $2, time - $p->{t0});
	}
	return (undef, $buf, time - $p->{t0});
}

# pushed over HTTP to A's queue wq: A's parked pop wakes, B's and the default tenant's time out
my $pB_wq = tenant_pop($B, '/api/v1/pop/queue/wq?autoAck=true&wait=true&timeout=1500');
my $pD_wq = tenant_pop($D, '/api/v1/pop/queue/wq?autoAck=true&wait=true&timeout=1500');
my $pA_wq = tenant_pop($A, '/api/v1/pop/queue/wq?autoAck=true&wait=true&timeout=5000');
is(wait_parked($node, 3), 3, 'three long-polls on wq parked (A, B, default)');
my $t0 = time;
($st) = as($A, 'POST', '/api/v1/push', { items => [ { queue => 'wq', payload => { to => 'A' } } ] });
is($st, 201, 'A pushes to its wq');
my ($ast, $abody) = tenant_response($pA_wq, 10);
my $lat = time - $t0;
is($ast, 200, 'A\'s long-poll is woken with the message');
is(eval { decode_json($abody)->{messages}[0]{data}{to} }, 'A', 'A\'s message');
ok($lat < 1.0, sprintf('A is woken well within its 5000 ms timeout (%.0f ms after the push)', 1000 * $lat));
for my $x ([ 'B', $pB_wq ], [ 'default', $pD_wq ])
{
	my ($xst, $xbody, $waited) = tenant_response($x->[1], 10);
	is($xst, 204, "$x->[0]'s long-poll on its own wq is not answered with A's message: 204");
	is($xbody, '', "$x->[0]: empty body");
	ok($waited >= 1.3 && $waited < 5, sprintf('%s answers at its 1500 ms timeout (%.0f ms)', $x->[0], 1000 * $waited));
}
is(tenants_of_queue('wq'), 'A', 'only A has a queue wq');

# a cycle's sink push under A wakes A's pop on the sink, not B's
as($A, 'POST', '/api/v1/push', { items => [ { queue => 'events', partition => 'p1', payload => { t => 'A', n => 4 } } ] });
($st, $doc) = as($A, 'GET', '/api/v1/pop/queue/events/partition/p1?consumerGroup=streams.counts');
my $m = $doc->{messages}[0];
my $pB_sink = tenant_pop($B, '/api/v1/pop/queue/wsink?autoAck=true&wait=true&timeout=1500');
my $pA_sink = tenant_pop($A, '/api/v1/pop/queue/wsink?autoAck=true&wait=true&timeout=5000');
is(wait_parked($node, 2), 2, 'A and B long-poll their wsink');
$t0 = time;
($st, $doc) = as($A, 'POST', '/streams/v1/cycle',
	{ query_id => $qid{$A}, partition_id => $m->{partitionId}, consumer_group => 'streams.counts',
	  push_items => [ { queue => 'wsink', payload => { from => 'A-cycle' } } ],
	  ack => { transactionId => $m->{transactionId}, leaseId => $m->{leaseId}, count => 1 } });
is($doc->{success}, JSON::PP::true, 'A\'s cycle with a sink push to wsink commits');
($ast, $abody) = tenant_response($pA_sink, 10);
$lat = time - $t0;
is($ast, 200, 'A\'s long-poll on wsink is woken by A\'s cycle');
is(eval { decode_json($abody)->{messages}[0]{data}{from} }, 'A-cycle', 'with the sink message');
ok($lat < 1.0, sprintf('within well under its timeout (%.0f ms)', 1000 * $lat));
my ($bst, $bbody, $bwaited) = tenant_response($pB_sink, 10);
is($bst, 204, 'B\'s long-poll on its wsink answers 204');
ok($bwaited >= 1.3 && $bwaited < 5, sprintf('at its 1500 ms timeout (%.0f ms)', 1000 * $bwaited));
is(tenants_of_queue('wsink'), 'A', 'the sink wsink exists only under A');

# ====================================================================== queue administration under the tenant
($st, $doc) = as($B, 'DELETE', '/api/v1/resources/queues/wq');
is($st, 200, 'B deleting wq (A\'s only) answers 200, as Queen');
is($doc->{existed}, JSON::PP::false, 'with existed false: B has no wq');
is(tenants_of_queue('wq'), 'A', 'A\'s wq survives');
my $others = "SELECT string_agg(tenant_id || '=' || lease_time, ',' ORDER BY tenant_id)"
  . " FROM queen.queues WHERE name = 'events' AND tenant_id <> '$B'";
my $others_before = sql($others);
($st, $doc) = as($B, 'POST', '/api/v1/configure', { queue => 'events', options => { leaseTime => 77 } });
is($st, 200, 'B configures its events');
is(sql("SELECT lease_time FROM queen.queues WHERE name = 'events' AND tenant_id = '$B'"), '77',
	'B\'s events has the new lease time');
is(sql($others), $others_before, 'A\'s and the default tenant\'s events are unchanged');
($st, $doc) = as($D, 'DELETE', '/api/v1/resources/queues/wsink');
is($doc->{existed}, JSON::PP::false, 'the default tenant cannot delete A\'s wsink');
($st) = as($A, 'DELETE', '/api/v1/resources/queues/wsink');
is($st, 200, 'A deletes its wsink');

# ====================================================================== reset wipes only the caller's state
my %rows = map { $_ => sql("SELECT count(*) FROM queen_streams.state WHERE query_id = '$qid{$_}'") } $A, $B, $D;
is(join(',', @rows{ $A, $B, $D }), '1,1,1', 'each tenant\'s counts has one state row');
($st, $doc) = as($A, 'POST', '/streams/v1/queries', { %$reg, config_hash => 'h2', reset => JSON::PP::true });
is($st, 200, 'A re-registers counts with a new hash and reset');
is_deeply([ @$doc{qw(query_id reset fresh)} ], [ $qid{$A}, JSON::PP::true, JSON::PP::false ],
	'A: its own query, reset true');
%rows = map { $_ => sql("SELECT count(*) FROM queen_streams.state WHERE query_id = '$qid{$_}'") } $A, $B, $D;
is(join(',', @rows{ $A, $B, $D }), '0,1,1', 'A\'s reset wiped A\'s state only');
($st, $doc) = as($B, 'POST', '/streams/v1/state/get', { query_id => $qid{$B}, partition_id => $lease{$B}{pid} });
is($doc->{rows}[0]{value}{t}, 'B', 'B still reads its row');
($st, $doc) = as($B, 'POST', '/streams/v1/queries', { %$reg, reset => JSON::PP::true });
is($doc->{reset}, JSON::PP::true, 'B resets with the same hash');
%rows = map { $_ => sql("SELECT count(*) FROM queen_streams.state WHERE query_id = '$qid{$_}'") } $A, $B, $D;
is(join(',', @rows{ $A, $B, $D }), '0,0,1', 'B\'s reset left the default tenant\'s row');
is(sql("SELECT string_agg(config_hash, ',' ORDER BY tenant_id) FROM queen_streams.queries WHERE name = 'counts'"),
	join(',', map { +{ $A => 'h2', $B => 'h1', $D => 'h1' }->{$_} } sort ($A, $B, $D)),
	'only A\'s config_hash changed');

# ====================================================================== the quota ladder (tenant C)
my $lad = { name => 'ladder', source_queue => 'events', config_hash => 'h' };
($st, $doc) = as($C, 'POST', '/streams/v1/queries', $lad);
is($st, 403, 'C without a quota row: 403');
is_deeply($doc, { success => JSON::PP::false, denied => JSON::PP::true,
	error => 'streams not granted for this tenant' }, 'C: denied, streams not granted for this tenant');
is(sql("SELECT count(*) FROM queen_streams.queries WHERE tenant_id = '$C'"), '0', 'C: nothing inserted');
($st, $doc) = as($D, 'POST', '/streams/v1/queries', { %$lad, name => 'default.ungated' });
is($st . ' ' . ($doc->{fresh} ? 'fresh' : ''), '200 fresh', 'the default tenant needs no quota row');

sql("INSERT INTO queen_streams.quota (tenant_id) VALUES ('$C')");
($st, $doc) = as($C, 'POST', '/streams/v1/queries', $lad);
is($st, 200, 'C with an enabled quota row: 200');
ok($doc->{fresh}, 'C: fresh');
my $ladder = $doc->{query_id};

sql("UPDATE queen_streams.quota SET enabled = false WHERE tenant_id = '$C'");
($st, $doc) = as($C, 'POST', '/streams/v1/queries', $lad);
is($st, 200, 'C revoked: the existing name still re-registers (200)');
is_deeply([ @$doc{qw(query_id fresh)} ], [ $ladder, JSON::PP::false ], 'C revoked: the same query, not fresh');
($st, $doc) = as($C, 'POST', '/streams/v1/queries', { %$lad, config_hash => 'h-new', reset => JSON::PP::true });
is($st, 200, 'C revoked: re-registering with reset passes too');
($st, $doc) = as($C, 'POST', '/streams/v1/queries', { %$lad, config_hash => 'h-newer' });
is($st, 409, 'C revoked: a changed hash without reset is a 409, not a denial');
($st, $doc) = as($C, 'POST', '/streams/v1/queries', { %$lad, name => 'ladder2' });
is($st, 403, 'C revoked: a new name is 403');
is($doc->{error}, 'streams not granted for this tenant', 'C revoked: streams not granted for this tenant');
ok($doc->{denied}, 'C revoked: denied');

sql("UPDATE queen_streams.quota SET enabled = true, max_queries = 2 WHERE tenant_id = '$C'");
($st, $doc) = as($C, 'POST', '/streams/v1/queries', { %$lad, name => 'ladder2' });
is($st, 200, 'C with max_queries = 2: the second name passes');
($st, $doc) = as($C, 'POST', '/streams/v1/queries', { %$lad, name => 'ladder3' });
is($st, 403, 'C with max_queries = 2: the third name is 403');
is_deeply($doc, { success => JSON::PP::false, denied => JSON::PP::true,
	error => 'streams query quota exceeded (max 2)' }, 'C: streams query quota exceeded (max 2)');
($st, $doc) = as($C, 'POST', '/streams/v1/queries', { %$lad, config_hash => 'h-new' });
is($st, 200, 'C at its cap: an existing name re-registers');
is(sql("SELECT string_agg(name, ',' ORDER BY name) FROM queen_streams.queries WHERE tenant_id = '$C'"),
	'ladder,ladder2', 'C holds exactly two queries');
cmp_ok(sql('SELECT count(*) FROM queen_streams.queries'), '>', 2,
	'the cap counted only C\'s queries, not the others\'');
sql("UPDATE queen_streams.quota SET max_queries = 1 WHERE tenant_id = '$B'");
($st, $doc) = as($B, 'POST', '/streams/v1/queries', { %$lad, name => 'b.second' });
is("$st $doc->{error}", '403 streams query quota exceeded (max 1)', 'B\'s own cap counts B\'s query');

# ====================================================================== /metrics: nothing shared
# Under tenancy the listener-wide series count every tenant's requests: not shown to a tenant.
for my $t ($A, $D)
{
	unlike($metrics_as{$t}, qr/^queen_streams_http_(requests_total|connections|parked_pops|worker_up)|^queen_streams_wakeups/m,
		"GET /metrics as $tname{$t}: no listener-wide series");
}
# The overflow bucket (stats[0], queues that found the counter table full) mixes tenants:
# fill the table, then ask as the all-zero tenant, which that bucket's tenant field holds.
sql(q{SELECT queen.push(jsonb_build_object('items',
	(SELECT jsonb_agg(jsonb_build_object('queue', 'overflow' || i, 'payload', '{}'::jsonb)) FROM generate_series(1, 1100) i)))});
cmp_ok(sql(q{SELECT pushed FROM queen_streams.metrics WHERE tenant_id IS NULL}), '>', 0,
	'queues beyond the counter table are counted in the overflow row');
my $zero = (as('00000000-0000-0000-0000-000000000000', 'GET', '/metrics'))[3];
unlike($zero, qr/\(other\)/, 'GET /metrics as the all-zero tenant does not show the overflow bucket');
unlike($zero, qr/tenant=/, 'nor anything else');

$node->stop;
done_testing();
