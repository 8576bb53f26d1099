# Cells (doc/deploying.md): a router database
# (queen_streams_router, PL/Proxy) in front of three cells, each a server
# with queen_streams and its own listener, all on this machine. Tenants are
# placed on different cells and one by the hash default; over the router's
# listener they are kept apart as on one server; a parked pop on the router
# is woken by a push through the router (and, by its recheck, by a push
# made on the cell directly); then, while every tenant's producer and
# stream worker run through the router, one tenant is moved to another
# cell, and afterwards every acknowledged push is stored exactly once on
# the tenant's cell and every source message is counted once in the sink
# and in the state.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsFault;
use QsHttp;
use JSON::PP;
use POSIX ();
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $A = 'aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa';
my $B = 'bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb';
my $C = 'cccccccc-cccc-4ccc-8ccc-cccccccccccc';
my $D = '00000000-0000-0000-0000-000000000001';    # the default tenant: no header, not placed
my %tname = ($A => 'A', $B => 'B', $C => 'C', $D => 'default');

my @cells = map { qs_node("cell$_", "queen_streams.tenancy = header\n") } 0 .. 2;
my $router = qs_node('router', "queen_streams.tenancy = header\n"
	  . "queen_streams.pop_recheck_interval = 60s\n", no_extension => 1);
$router->safe_psql('postgres', 'CREATE EXTENSION queen_streams_router CASCADE');
for my $i (0 .. 2)
{
	my $c = $cells[$i];
	$router->safe_psql('postgres', sprintf(
		"SELECT queen_router.add_cell('cell%d', 'host=%s port=%d dbname=postgres')",
		$i, $c->host, $c->port));
}
$router->safe_psql('postgres', "SELECT queen_router.place_tenant('$A', 'cell0'),"
	  . " queen_router.place_tenant('$B', 'cell1'), queen_router.place_tenant('$C', 'cell2')");
wait_http($router);

sub rsql { return $router->safe_psql('postgres', $_[0]); }
sub cell_of { my $c = rsql("SELECT queen_router.cell_of('$_[0]')"); $c =~ s/cell//; return $cells[$c]; }

# streams are granted per tenant on its cell (the control plane's table)
for my $t ($A, $B, $C)
{
	cell_of($t)->safe_psql('postgres', "INSERT INTO queen_streams.quota (tenant_id) VALUES ('$t')");
}

sub as
{
	my ($node, $t, $method, $path, $body) = @_;
	my $h = ($t eq $D) ? {} : { 'x-queen-tenant' => $t };
	return http_json($node, $method, $path, $body, $h);
}

# Which cells hold queues of tenant t, as "cell0,cell2".
sub cells_with
{
	my ($t) = @_;
	return join(',', map { "cell$_" } grep {
		$cells[$_]->safe_psql('postgres', "SELECT count(*) FROM queen.queues WHERE tenant_id = '$t'") > 0
	} 0 .. 2);
}

# Every function of a cell that takes a tenant has its routed twin on the
# router, with the same arguments (names, types and defaults).
{
	# (queen.tenant_*: a cell's side of a move, called by the router itself)
	my $sig = q{
		SELECT p.oid::regprocedure::text || ' (' || pg_get_function_arguments(p.oid) || ') -> '
			|| pg_get_function_result(p.oid)
		FROM pg_proc p
		WHERE p.pronamespace IN ('queen'::regnamespace, 'queen_streams'::regnamespace)
		  AND p.proargnames && ARRAY['tenant', 'p_tenant']::text[]
		  AND p.proname NOT LIKE 'tenant\_%'};
	my %on_router = map { $_ => 1 } split /\n/, $router->safe_psql('postgres', $sig);
	my @on_cell = split /\n/, $cells[0]->safe_psql('postgres', $sig);
	my @missing = grep { !$on_router{$_} } @on_cell;
	ok(@on_cell > 30, 'the cell has ' . scalar(@on_cell) . ' functions that take a tenant');
	is(join("\n", @missing), '', 'the router has each of them, with the same arguments and result');
}

# The router's upgrade: 0.1.0 updated in place has a fresh install's
# functions (names, arguments, results, rights), so routed twins change
# with the cells' functions.
{
	my $all = q{
		SELECT string_agg(p.oid::regprocedure::text || ' -> ' || pg_get_function_result(p.oid)
			|| ' ' || p.prosecdef || ' ' || coalesce(p.proacl::text, '-') || ' ' || p.prosrc, E'\n'
			ORDER BY p.oid::regprocedure::text)
		FROM pg_proc p
		WHERE p.pronamespace IN ('queen'::regnamespace, 'queen_streams'::regnamespace,
								 'queen_router'::regnamespace)};
	$router->safe_psql('postgres', 'CREATE DATABASE upgr');
	$router->safe_psql('upgr', "CREATE EXTENSION queen_streams_router VERSION '0.1.0' CASCADE");
	my $old = $router->safe_psql('upgr', $all);
	$router->safe_psql('upgr', 'ALTER EXTENSION queen_streams_router UPDATE');
	my ($want) = PostgreSQL::Test::Utils::slurp_file('queen_streams_router.control')
		=~ /^default_version = '([^']+)'/m;
	is($router->safe_psql('upgr', "SELECT extversion FROM pg_extension WHERE extname = 'queen_streams_router'"),
		$want, "router: 0.1.0 updates to $want, the control file's version");
	isnt($old, $router->safe_psql('upgr', $all), 'router: the update changed its functions');
	is($router->safe_psql('upgr', $all), $router->safe_psql('postgres', $all),
		'router: updated, the same functions as a fresh install');
	$router->safe_psql('postgres', 'DROP DATABASE upgr');
}

# ---------------------------------------------------------------- placement and isolation
my %pid;    # tenant => partition id of its orders/Default
for my $t ($A, $B, $C, $D)
{
	my ($st, $doc) = as($router, $t, 'POST', '/api/v1/configure',
		{ queue => 'orders', options => { leaseTime => 30 } });
	is($st, 200, "$tname{$t}: configure through the router");
	($st, $doc) = as($router, $t, 'POST', '/api/v1/push',
		{ items => [ map { { queue => 'orders', transactionId => "$tname{$t}-$_",
			payload => { owner => $tname{$t}, n => $_ } } } 1 .. 3 ] });
	is($st, 201, "$tname{$t}: push through the router");
	$pid{$t} = $doc->[0]{partition_id};
}
is(cells_with($A), 'cell0', 'tenant A lives on cell0 only');
is(cells_with($B), 'cell1', 'tenant B lives on cell1 only');
is(cells_with($C), 'cell2', 'tenant C lives on cell2 only');
my $dcell = rsql("SELECT queen_router.cell_of('$D')");
is(cells_with($D), $dcell, "the default tenant lives on its hash's cell ($dcell) only");

# /metrics: the router keeps no queues (its counters only); a cell's has the gauges
{
	my ($st, $text) = http($router, 'GET', '/metrics');
	is($st, 200, "the router's /metrics answers");
	unlike($text, qr/^queen_streams_consumer_group_backlog_messages\{/m, 'without gauges of queues it does not keep');
	($st, $text) = http(cell_of($D), 'GET', '/metrics');
	like($text, qr/^queen_streams_consumer_group_backlog_messages\{[^}]*queue="orders"[^}]*\} 3$/m,
		"the default tenant's cell has its backlog");
}

for my $t ($A, $B, $C, $D)
{
	my ($st, $doc) = as($router, $t, 'GET', '/api/v1/pop/queue/orders?batch=10');
	is($st, 200, "$tname{$t}: pop through the router");
	my @owners = map { $_->{data}{owner} } @{ $doc->{messages} };
	is_deeply(\@owners, [ ($tname{$t}) x 3 ], "$tname{$t} pops its own three messages only");
	($st, $doc) = as($router, $t, 'GET', '/api/v1/resources/queues');
	is_deeply([ map { $_->{name} } @{ $doc->{queues} } ], ['orders'], "$tname{$t} lists its one queue");
}

# another tenant's partition: not readable, not ackable, not a stream partition
{
	my ($st, $doc) = as($router, $B, 'GET', "/api/v1/messages/$pid{$A}/A-1");
	is($st, 404, "B cannot read A's message through the router");
	($st, $doc) = as($router, $B, 'POST', '/api/v1/ack',
		{ transactionId => 'A-1', partitionId => $pid{$A}, status => 'completed' });
	ok($st == 200 && !$doc->[0]{success} || $st == 404, "B cannot ack A's message")
	  or diag("$st " . encode_json($doc // {}));
	my ($qst, $reg) = as($router, $A, 'POST', '/streams/v1/queries',
		{ name => 'iso', source_queue => 'orders', sink_queue => 'orders.out', config_hash => 'h' });
	is($qst, 200, 'A registers a query through the router');
	($st) = as($router, $B, 'POST', '/streams/v1/state/get',
		{ query_id => $reg->{query_id}, partition_id => $pid{$A} });
	is($st, 404, "B's state/get on A's partition answers 404 (the tenancy gate on A's cell)");
	($st) = as($router, $B, 'POST', '/streams/v1/cycle',
		{ query_id => $reg->{query_id}, partition_id => $pid{$A}, consumer_group => 'g' });
	is($st, 404, "B's cycle on A's partition answers 404");
	($st, $doc) = as($router, $A, 'POST', '/api/v1/push', { items => [ { queue => '' } ] });
	is($st, 400, 'a cell\'s validation error is a 400 through the router');
	is($doc->{error}, 'item 0: "queue" must not be empty', '... with the cell\'s own message');
}

# the spanning functions run on every cell and merge
{
	my $sweep = json_sql($router, 'queen.retention_sweep()');
	ok(exists $sweep->{partitions}, 'queen.retention_sweep() on the router answers the merged sweep');
	is(json_sql($router, "queen.maintenance('pop')")->{popMaintenanceMode}, JSON::PP::false,
		'maintenance state merged over the cells');
}

# ---------------------------------------------------------------- long-poll pops on the router
{
	# the router's recheck is 60 s and the pop's timeout 20 s: only a wake-up
	# can answer it with a message
	my $start = time;
	my $kid = fork // die;
	if ($kid == 0)
	{
		sleep 1;
		as($router, $A, 'POST', '/api/v1/push', { items => [ { queue => 'waitq', payload => { w => 1 } } ] });
		POSIX::_exit(0);
	}
	my ($st, $doc) = as($router, $A, 'GET', '/api/v1/pop/queue/waitq?wait=true&timeout=20000');
	waitpid($kid, 0);
	is($st, 200, 'a pop parked on the router is answered by a push through the router');
	is($doc->{messages}[0]{data}{w}, 1, '... with that message');
	note(sprintf('parked pop answered after %.2f s', time - $start));

	# a push made on the cell directly is seen by the router's recheck
	$router->append_conf('postgresql.conf', "queen_streams.pop_recheck_interval = 1s\n");
	$router->reload;
	sleep 1;
	$kid = fork // die;
	if ($kid == 0)
	{
		sleep 1;
		as(cell_of($C), $C, 'POST', '/api/v1/push', { items => [ { queue => 'waitq', payload => { w => 2 } } ] });
		POSIX::_exit(0);
	}
	($st, $doc) = as($router, $C, 'GET', '/api/v1/pop/queue/waitq?wait=true&timeout=20000');
	waitpid($kid, 0);
	is($st, 200, 'a pop parked on the router sees a push made on its cell directly (recheck)');
	($st, $doc) = as(cell_of($C), $C, 'GET', '/api/v1/pop/queue/orders?batch=10&consumerGroup=direct');
	is(scalar @{ $doc->{messages} }, 3, "C's cell's own listener serves C directly");
}

# ---------------------------------------------------------------- load, and a move amid it
my $dir = PostgreSQL::Test::Utils::tempdir();
my $url = "http://127.0.0.1:$router->{qs_http_port}";
my $per = 1500;
my $deadline = time + 120;
my (%qid, %kids);
for my $t ($A, $B, $C)
{
	for my $q (qw(src src.sink))
	{
		my ($st) = as($router, $t, 'POST', '/api/v1/configure',
			{ queue => $q, options => { leaseTime => 2, retryLimit => 1000 } });
		die "configure $q: $st" unless $st == 200;
	}
	my ($st, $reg) = as($router, $t, 'POST', '/streams/v1/queries',
		{ name => 'count', source_queue => 'src', sink_queue => 'src.sink', config_hash => 'h1' });
	die "register: $st" unless $st == 200;
	my $n = $tname{$t};
	$kids{"p$n"} = QsFault::spawn(\&QsFault::pusher, dir => $dir, url => $url, tenant => $t,
		name => "p$n", queue => 'src', count => $per, batch => 50, parts => 4, pace => 0.05,
		deadline => $deadline);
	$kids{"w$n"} = QsFault::spawn(\&QsFault::streamer, dir => $dir, url => $url, tenant => $t,
		name => "w$n", qid => $reg->{query_id}, query => 'count', source => 'src',
		sink => 'src.sink', batch => 40, lease => 2, deadline => $deadline);
}

# move B from cell1 to cell2 once half of its pushes were acknowledged
sleep 0.1 while QsFault::pushed_so_far($dir, 'pB') < $per / 2 && time < $deadline;
my $at = QsFault::pushed_so_far($dir, 'pB');
my $t0 = time;
my ($ok, $out, $err) = $router->psql('postgres', "CALL queen_router.move_tenant('$B', 'cell2')");
is($ok, 0, "tenant B moved from cell1 to cell2 after $at of its pushes") or diag($err);
note(sprintf('the move took %.2f s: %s', time - $t0, $err));
is(rsql("SELECT queen_router.cell_of('$B')"), 'cell2', 'B is placed on cell2');
is($cells[1]->safe_psql('postgres', "SELECT count(*) FROM queen.queues WHERE tenant_id = '$B'")
	  + $cells[1]->safe_psql('postgres', "SELECT count(*) FROM queen_streams.queries WHERE tenant_id = '$B'"),
	0, "nothing of B is left on cell1");

for my $n (qw(A B C))
{
	waitpid($kids{"p$n"}, 0);
	is($?, 0, "pusher of $n finished") or diag(join "\n", QsFault::slurp_lines("$dir/p$n.log"));
}
# until each stream counted every message
my $counted = sub {
	my ($t) = @_;
	return cell_of($t)->safe_psql('postgres',
		"SELECT coalesce(sum((s.value->>'n')::int), 0) FROM queen_streams.state s"
		  . " JOIN queen_streams.queries q ON q.id = s.query_id"
		  . " WHERE q.tenant_id = '$t' AND q.name = 'count' AND s.key = 'n'");
};
sleep 0.2 while time < $deadline && grep { $counted->($_) < $per } ($A, $B, $C);
open my $stop, '>', "$dir/stop" or die;
close $stop;
for my $n (qw(A B C))
{
	waitpid($kids{"w$n"}, 0);
	is($?, 0, "stream worker of $n stopped cleanly") or diag(join "\n", QsFault::slurp_lines("$dir/w$n.log"));
}

# Frames of the tenant's queue on its cell: key => copies, and key => message id.
sub stored
{
	my ($t, $queue, $field, $ids) = @_;
	my %n;
	for (grep { length } split /\n/, cell_of($t)->safe_psql('postgres', qq{
		SELECT f.payload::jsonb->>'$field', f.message_id
		FROM queen.log_segments s
		JOIN queen.log_partitions p ON p.id = s.partition_id
		JOIN queen.queues q ON q.id = p.queue_id,
		LATERAL queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f
		WHERE q.tenant_id = '$t' AND q.name = '$queue'}))
	{
		my ($k, $id) = split /\|/;
		$n{$k}++;
		$ids->{$k} = $id if $ids;
	}
	return \%n;
}

for my $t ($A, $B, $C)
{
	my $n = $tname{$t};
	my %want = map { ("p$n-$_" => 1) } 0 .. $per - 1;
	my %ids;
	QsFault::exactly_once(stored($t, 'src', 'k', \%ids), \%want, "$n: pushed to src");
	QsFault::ids_match($dir, ["p$n"], \%ids, "$n: src");
	QsFault::exactly_once(stored($t, 'src.sink', 'src'), \%want, "$n: stream sink");
	is($counted->($t), $per, "$n: the stream state counted each message once");
	is(QsFault::cursors_behind(cell_of($t), 'src', 'streams.count'), '',
		"$n: every source partition acked to its last offset, no lease live");
	my ($cycles, $failed) = (0, 0);
	for (QsFault::slurp_lines("$dir/w$n.log")) { $cycles++ if /^C /; $failed++ if /^F/ }
	note("$n: $cycles cycles committed, $failed failed");
}
is(cells_with($B), 'cell2', 'B lives on cell2 only');

$router->stop;
$_->stop for @cells;
done_testing();
