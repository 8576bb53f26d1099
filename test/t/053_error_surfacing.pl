# Errors are not disguised (README "Errors"): over HTTP a deadlock or a
# serialization failure inside a transaction or a streams cycle answers
# 503 with Retry-After (not a 200 success:false with PostgreSQL's message
# while the rest commits), and the server log has it with its SQLSTATE; a
# verdict on the work (an expired lease) is still success:false, logged
# too. Through a router of cells, an error after a cell may have committed
# answers "outcome unknown", never "nothing was committed", and a retry
# with the same transaction ids is answered duplicate.
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

my $json = JSON::PP->new->canonical;
# %e: the SQLSTATE of every log line
my $node = qs_node('errors', "log_line_prefix = '%m [%p] %e '\n");

sub sql { return $node->safe_psql('postgres', $_[0]); }

# POST `doc` on a new connection, the answer read later (read_answer).
sub post_async
{
	my ($n, $path, $doc, $headers) = @_;
	my $body = $json->encode($doc);
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $n->{qs_http_port},
		Proto => 'tcp') or die "connect: $!";
	my $h = join('', map { "$_: $headers->{$_}\r\n" } sort keys %{ $headers // {} });
	print $s "POST $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\n$h"
	  . "Content-Type: application/json\r\nContent-Length: " . length($body) . "\r\n\r\n$body";
	return $s;
}

# (status, head, decoded body) of the answer on `s`, read until it closes.
sub read_answer
{
	my ($s) = @_;
	my $buf = '';
	my $deadline = time + 60;
	$s->blocking(0);
	while (time < $deadline)
	{
		my $n = sysread($s, $buf, 65536, length $buf);
		last if defined $n && $n == 0;
		usleep(10_000) if !defined $n;
	}
	close $s;
	my ($status, $head, $body) = $buf =~ /^HTTP\/1\.1 (\d+)(.*?)\r\n\r\n(.*)$/s or return (undef, $buf);
	return ($status, $head, eval { $json->decode($body) } // $body);
}

# Wait (bounded) until a backend other than `except` waits on a lock.
sub wait_lock_waiter
{
	my ($n, $except) = @_;
	my $deadline = time + 30;
	while (time < $deadline)
	{
		return 1 if $n->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND pid <> $except") > 0;
		usleep(50_000);
	}
	return 0;
}

# The server log from offset `at` until it matches `re` (bounded).
sub log_since
{
	my ($n, $at, $re) = @_;
	my $deadline = time + 10;
	my $log;
	usleep(100_000) while (($log = slurp_file($n->logfile, $at)) !~ $re && time < $deadline);
	return $log;
}

# A source message leased to a registered query: its partition, lease and query.
sub leased
{
	my ($src) = @_;
	sql("SELECT queen.push(jsonb_build_object('items', jsonb_build_array(jsonb_build_object(
		'queue', '$src', 'transactionId', '$src-1', 'payload', 1))))");
	my $qid = sql("SELECT queen_streams.register_query(jsonb_build_object('name', '$src.q',
		'source_queue', '$src', 'config_hash', 'h'))->>'query_id'");
	my ($pid, $lease) = split /\|/, sql("SELECT p->>'partitionId', p->>'leaseId'
		FROM queen.pop('$src', batch => 10) p");
	return ($pid, $lease, $qid);
}

sub partition_of
{
	my ($q) = @_;
	sql("SELECT queen.push(jsonb_build_object('items', jsonb_build_array(jsonb_build_object(
		'queue', '$q', 'payload', 0))))");
	return sql("SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
		WHERE q.name = '$q'");
}

sub segments
{
	my ($n, $q) = @_;
	return $n->safe_psql('postgres', "SELECT count(*) FROM queen.log_segments s
		JOIN queen.log_partitions p ON p.id = s.partition_id JOIN queen.queues q ON q.id = p.queue_id
		WHERE q.name = '$q'");
}

# ---------------------------------------------------------------- deadlocks
# The request pushes (locking the pushed partition's row), then acks
# (locking the source's cursor row). A session holds the cursor row, the
# request waits on it, then the session asks for the pushed partition's
# row: a deadlock, which the request finds first (the session's
# deadlock_timeout is long).
my %deadlock = (
	transaction => sub {
		my ($pid, $lease) = leased('dl_t_src');
		partition_of('dl_t_out');
		return ('/api/v1/transaction', { operations => [
			{ type => 'push', items => [ { queue => 'dl_t_out', payload => 1 } ] },
			{ type => 'ack', transactionId => 'dl_t_src-1', partitionId => $pid, leaseId => $lease,
			  status => 'completed' } ] }, 'dl_t_src', 'dl_t_out', 'transaction failed');
	},
	cycle => sub {
		my ($pid, $lease, $qid) = leased('dl_c_src');
		partition_of('dl_c_out');
		return ('/streams/v1/cycle', { query_id => $qid, partition_id => $pid,
			push_items => [ { queue => 'dl_c_out', payload => 1 } ],
			ack => { leaseId => $lease, status => 'completed', count => 1 } },
			'dl_c_src', 'dl_c_out', 'cycle failed');
	});
for my $what (sort keys %deadlock)
{
	my ($path, $doc, $src, $out) = $deadlock{$what}->();
	my $before = segments($node, $out);
	my $s1 = $node->background_psql('postgres');
	my $s1pid = $s1->query_safe("SET deadlock_timeout = '100s'; SELECT pg_backend_pid()");
	$s1->query_safe("BEGIN; SELECT 1 FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id
		JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = '$src' FOR UPDATE OF c");
	my $at = -s $node->logfile;
	my $req = post_async($node, $path, $doc);
	ok(wait_lock_waiter($node, $s1pid), "$what: the request waits on the cursor row");
	# blocks until the request lost the deadlock and rolled back
	$s1->query_safe("SELECT 1 FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
		WHERE q.name = '$out' FOR UPDATE OF p");
	$s1->query_safe('ROLLBACK');
	$s1->quit;
	my ($st, $head, $body) = read_answer($req);
	is($st, 503, "$what: a deadlock answers 503") or diag(explain($body));
	like($head, qr/\r\nRetry-After: 1\r\n/i, "$what: with Retry-After: 1");
	like(ref $body ? $body->{error} : $body, qr/: deadlock detected; nothing was committed, retry$/,
		"$what: in our words");
	is(segments($node, $out), $before, "$what: its push did not commit");
	like(log_since($node, $at, qr/40P01 LOG: .*failed: deadlock detected \(answered 503, retryable\)/),
		qr/40P01 LOG: .*POST \Q$path\E failed: deadlock detected \(answered 503, retryable\)/,
		"$what: the server log has it with its SQLSTATE");
}

# ---------------------------------------------------------------- serialization failures
# Under REPEATABLE READ (a database default here), the request's snapshot
# is taken, then it waits on a partition row a session has written and
# commits: a serialization failure.
sql("ALTER DATABASE postgres SET default_transaction_isolation = 'repeatable read'");
$node->restart;    # the listener's sessions take the database default when they start
wait_http($node);
my %serial = (
	transaction => sub {
		partition_of('sf_t_out');
		return ('/api/v1/transaction', { operations => [
			{ type => 'push', items => [ { queue => 'sf_t_out', payload => 1 } ] } ] }, 'sf_t_out');
	},
	cycle => sub {
		my ($pid, $lease, $qid) = leased('sf_c_src');
		partition_of('sf_c_out');
		return ('/streams/v1/cycle', { query_id => $qid, partition_id => $pid,
			push_items => [ { queue => 'sf_c_out', payload => 1 } ],
			ack => { leaseId => $lease, status => 'completed', count => 1 } }, 'sf_c_out');
	});
for my $what (sort keys %serial)
{
	my ($path, $doc, $out) = $serial{$what}->();
	my $s1 = $node->background_psql('postgres');
	my $s1pid = $s1->query_safe('SELECT pg_backend_pid()');
	$s1->query_safe("BEGIN; SELECT queen.push(jsonb_build_object('items', jsonb_build_array(
		jsonb_build_object('queue', '$out', 'payload', 2))))");
	my $before = segments($node, $out);
	my $at = -s $node->logfile;
	my $req = post_async($node, $path, $doc);
	ok(wait_lock_waiter($node, $s1pid), "$what: the request waits on the partition row");
	$s1->query_safe('COMMIT');
	$s1->quit;
	my ($st, $head, $body) = read_answer($req);
	is($st, 503, "$what: a serialization failure answers 503") or diag(explain($body));
	like($head, qr/\r\nRetry-After: 1\r\n/i, "$what: with Retry-After: 1");
	like(ref $body ? $body->{error} : $body, qr/: serialization failure; nothing was committed, retry$/,
		"$what: in our words");
	is(segments($node, $out), $before + 1, "$what: only the session's push is stored");
	like(log_since($node, $at, qr/40001 LOG: .*\(answered 503, retryable\)/),
		qr/40001 LOG: .*POST \Q$path\E failed: could not serialize.* \(answered 503, retryable\)/,
		"$what: the server log has it with its SQLSTATE");
}
sql("ALTER DATABASE postgres RESET default_transaction_isolation");

# ---------------------------------------------------------------- a verdict stays an answer, logged
{
	my ($pid, $lease, $qid) = leased('v_src');
	my $at = -s $node->logfile;
	my ($st, $doc) = http_json($node, 'POST', '/streams/v1/cycle', { query_id => $qid, partition_id => $pid,
		ack => { leaseId => 'not-the-lease', status => 'completed', count => 1 } });
	is($st, 200, 'a cycle with a wrong lease answers 200');
	is($doc->{error}, 'invalid or expired lease', '... success:false with our message');
	like(log_since($node, $at, qr/22023 LOG: .*answered success:false/),
		qr/22023 LOG:  a streams cycle rolled back and answered success:false: invalid or expired lease/,
		'... logged with its SQLSTATE');

	# a trigger's RAISE is a verdict too, answered in our words: its message stays in the log
	sql(q{CREATE FUNCTION public.boom() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'secret detail: SELECT password FROM users'; END $$;
		CREATE TRIGGER boom AFTER INSERT ON queen.log_segments FOR EACH ROW EXECUTE FUNCTION public.boom();});
	$at = -s $node->logfile;
	my $raw;
	($st, $doc, undef, $raw) = http_json($node, 'POST', '/api/v1/transaction', { operations => [
		{ type => 'push', items => [ { queue => 'boom', payload => 1 } ] } ] });
	is($st, 200, "a transaction a trigger refuses answers 200");
	is($doc->{error}, 'rejected by a trigger (SQLSTATE P0001); see the server log',
		'... success:false in our words');
	unlike($raw, qr/secret|password/, '... and nothing of the trigger\'s message');
	like(log_since($node, $at, qr/P0001 LOG: .*secret detail/),
		qr/P0001 LOG:  queen.transaction rolled back and answered success:false: secret detail/,
		'... which the server log has, with its SQLSTATE');
	sql('DROP TRIGGER boom ON queen.log_segments; DROP FUNCTION public.boom()');
}

# ---------------------------------------------------------------- through a router: outcome unknown
# The router's queen.transaction calls the cell's (which commits when the
# call returns) and then sleeps past the router listener's statement
# timeout: the cell committed, the router failed after it.
{
	my $T = 'aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa';
	my $cell = qs_node('cell', "queen_streams.tenancy = header\n");
	my $router = qs_node('router', "queen_streams.tenancy = header\n"
		  . "queen_streams.http_statement_timeout = '2s'\n" . "log_line_prefix = '%m [%p] %e '\n",
		no_extension => 1);
	$router->safe_psql('postgres', 'CREATE EXTENSION queen_streams_router CASCADE');
	$router->safe_psql('postgres', sprintf("SELECT queen_router.add_cell('cell0', 'host=%s port=%d dbname=postgres')",
		$cell->host, $cell->port));
	$router->safe_psql('postgres', "SELECT queen_router.place_tenant('$T', 'cell0')");
	wait_http($router);
	my $h = { 'x-queen-tenant' => $T };
	my $txn = { operations => [ { type => 'push', items => [ { queue => 'ou', transactionId => 'ou-1', payload => 1 } ] } ] };
	my ($st, $doc) = http_json($router, 'POST', '/api/v1/transaction', $txn, $h);
	is($st, 200, 'router: a transaction through the router commits on the cell');
	is(segments($cell, 'ou'), 1, 'router: stored on the cell');

	$router->safe_psql('postgres', q{
		CREATE FUNCTION queen.transaction_cell(request jsonb, tenant uuid DEFAULT NULL, producer_sub text DEFAULT NULL)
		RETURNS jsonb LANGUAGE plproxy
		AS $$ CLUSTER 'queen_cells'; RUN ON queen_router.cell_for_write(tenant); TARGET queen.transaction; $$;
		CREATE OR REPLACE FUNCTION queen.transaction(request jsonb, tenant uuid DEFAULT NULL, producer_sub text DEFAULT NULL)
		RETURNS jsonb LANGUAGE plpgsql AS $$
		DECLARE r jsonb;
		BEGIN
			r := queen.transaction_cell(request, tenant, producer_sub);
			PERFORM pg_sleep(10);
			RETURN r;
		END $$;});
	$txn->{operations}[0]{items}[0]{transactionId} = 'ou-2';
	my $at = -s $router->logfile;
	($st, $doc) = http_json($router, 'POST', '/api/v1/transaction', $txn, $h);
	is($st, 500, 'router: a timeout after the cell committed answers 500');
	is($doc->{outcome}, 'unknown', 'router: ... with "outcome":"unknown"') or diag(explain($doc));
	unlike($doc->{error} // '', qr/nothing was committed/, 'router: ... never "nothing was committed"');
	is(segments($cell, 'ou'), 2, 'router: (the cell did commit it)');
	like(log_since($router, $at, qr/57014 LOG: .*outcome unknown\)/),
		qr/57014 LOG: .*POST \/api\/v1\/transaction failed: .*\(answered 500, outcome unknown\)/,
		'router: the server log has it with its SQLSTATE');

	# the retry the README asks for: the same transaction ids, answered duplicate
	$router->safe_psql('postgres', q{
		CREATE OR REPLACE FUNCTION queen.transaction(request jsonb, tenant uuid DEFAULT NULL, producer_sub text DEFAULT NULL)
		RETURNS jsonb LANGUAGE sql AS $$ SELECT queen.transaction_cell(request, tenant, producer_sub) $$;});
	($st, $doc) = http_json($router, 'POST', '/api/v1/transaction', $txn, $h);
	is($st, 200, 'router: the retry with the same transaction id is served');
	is($doc->{results}[0]{status}, 'duplicate', 'router: ... and answered duplicate') or diag(explain($doc));
	is(segments($cell, 'ou'), 2, 'router: stored once');

	# a cell's own error means the cell rolled back: not "outcome unknown"
	($st, $doc) = http_json($router, 'POST', '/api/v1/transaction', { operations => 7 }, $h);
	is($st, 400, "router: a cell's validation error is still a 400");
	ok(!exists $doc->{outcome}, 'router: ... without an outcome');
	$router->stop;
	$cell->stop;
}

$node->stop;
done_testing();
