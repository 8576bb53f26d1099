# Limits of the HTTP listener: body and header sizes, the header timeout
# against a slow client, max connections, keep-alive, settings reloaded on
# SIGHUP, and a request that fails leaving the worker serving.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use IO::Socket::INET;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = qs_node('limits', <<'EOF');
queen_streams.max_body_bytes = 4096
queen_streams.header_timeout = 1000
EOF
my $port = $node->{qs_http_port};

sub sock
{
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp')
	  or die "connect: $!";
	$s->autoflush(1);
	return $s;
}

# Read one response (headers + Content-Length body) from a keep-alive socket.
sub read_response
{
	my ($s) = @_;
	my $buf = '';
	while ($buf !~ /\r\n\r\n/)
	{
		my $n = sysread($s, $buf, 4096, length $buf);
		return undef unless $n;
	}
	my ($head, $rest) = split /\r\n\r\n/, $buf, 2;
	my ($len) = $head =~ /Content-Length: (\d+)/i;
	$len //= 0;
	while (length($rest) < $len)
	{
		my $n = sysread($s, $rest, 4096, length $rest);
		last unless $n;
	}
	my ($status) = $head =~ m{^HTTP/1\.1 (\d+)};
	return ($status, $head, $rest);
}

# ---- body size (413) and header size (431)
my ($st, $doc, $hdr) = http_json($node, 'POST', '/api/v1/push',
	{ items => [ { queue => 'big', payload => { s => 'x' x 5000 } } ] });
is($st, 413, 'a body over max_body_bytes answers 413');
is($doc->{error}, 'request body too large', 'its message');
($st) = http_json($node, 'POST', '/api/v1/push',
	{ items => [ { queue => 'big', payload => { s => 'x' x 3000 } } ] });
is($st, 201, 'a body under the limit is served');

($st, $doc) = http_json($node, 'GET', '/health', undef, { 'x-big' => 'a' x 20000 });
is($st, 431, 'headers over max_header_bytes answer 431');
my $raw = raw_request($node, "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " . ('a' x 200000) . "\r\n\r\n", 5);
like($raw, qr{^HTTP/1\.1 431}, 'headers far over the limit answer 431 too');

# ---- a slow client is cut off by the header timeout
{
	my $s = sock();
	my $t0 = time;
	print $s "GET /health HTTP/1.1\r\nHost: x\r\n";
	my $closed;
	for (1 .. 40)
	{
		# trickle a header byte every 100 ms: never idle, never complete
		last unless print $s "X";
		usleep(100_000);
		$s->blocking(0);
		my $n = sysread($s, my $buf, 4096);
		$s->blocking(1);
		# closed, or told 408 first (the head is read before libmicrohttpd sees it)
		if (defined $n && ($n == 0 || $buf =~ m{^HTTP/1\.1 408})) { $closed = time - $t0; last; }
	}
	ok(defined $closed, 'the trickling client was disconnected');
	ok(defined $closed && $closed >= 0.9 && $closed < 3,
		'at the header timeout (' . ($closed // 'never') . ' s)');
	close $s;
}

# ---- keep-alive: two requests on one connection
{
	my $s = sock();
	print $s "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
	my ($s1) = read_response($s);
	print $s "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
	  . "Content-Length: 12\r\n\r\n{\"items\":[]}";
	my ($s2, undef, $body2) = read_response($s);
	is($s1, 200, 'keep-alive: first request');
	is($s2, 201, 'keep-alive: second request on the same connection');
	is($body2, '[]', 'keep-alive: second body');
	close $s;
}

# ---- max connections (set on SIGHUP): 503 with Retry-After beyond it
$node->safe_psql('postgres', 'ALTER SYSTEM SET queen_streams.max_connections = 3');
$node->safe_psql('postgres', 'ALTER SYSTEM SET queen_streams.max_body_bytes = 8192');
$node->reload;
usleep(500_000);
{
	my @held = map { sock() } 1 .. 3;
	usleep(300_000);
	my $s = sock();
	print $s "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
	my ($status, $head, $body) = read_response($s);
	is($status, 503, 'a connection over max_connections answers 503');
	like($head, qr/Retry-After: 1/i, 'with Retry-After');
	like($body, qr/too many connections/, 'and a message');
	close $_ for @held, $s;
	usleep(300_000);
	($st) = http_json($node, 'GET', '/health');
	is($st, 200, 'served again once connections closed');
}
($st) = http_json($node, 'POST', '/api/v1/push',
	{ items => [ { queue => 'big', payload => { s => 'x' x 5000 } } ] });
is($st, 201, 'a raised max_body_bytes applies after SIGHUP');

# ---- a request that fails leaves the worker serving
my $pids = $node->safe_psql('postgres',
	'SELECT string_agg(pid::text, \',\' ORDER BY pid) FROM queen_streams.http_workers()');
$node->safe_psql('postgres', "ALTER SYSTEM SET queen_streams.http_statement_timeout = '300ms'");
$node->reload;
usleep(500_000);
my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN; LOCK TABLE queen.queues IN ACCESS EXCLUSIVE MODE;');
for (1 .. 4)
{
	($st, $doc) = http_json($node, 'POST', '/api/v1/push',
		{ items => [ { queue => "locked$_", payload => {} } ] });
	is($st, 500, "a push blocked past the statement timeout answers 500 ($_)");
	is($doc->{error}, 'push failed: statement timeout or canceled; nothing was committed, safe to retry',
		'the error says what failed in words, not the PostgreSQL message');
}
$locker->query_safe('ROLLBACK');
$locker->quit;
($st, $doc) = http_json($node, 'POST', '/api/v1/push', { items => [ { queue => 'locked', payload => {} } ] });
is($st, 201, 'the next push is served');
is($node->safe_psql('postgres',
	'SELECT string_agg(pid::text, \',\' ORDER BY pid) FROM queen_streams.http_workers()'),
	$pids, 'by the same worker processes');
# ---- a 500 carries words, the PostgreSQL message (SQL text, values) goes to the log only
$node->safe_psql('postgres', q{
	CREATE FUNCTION public.boom() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN RAISE EXCEPTION 'secret detail: SELECT password FROM users' USING DETAIL = 'row 42 of accounts'; END $$;
	CREATE TRIGGER boom AFTER INSERT ON queen.log_segments FOR EACH ROW EXECUTE FUNCTION public.boom();});
my $log_at = -s $node->logfile;
($st, $doc, undef, my $raw500) = http_json($node, 'POST', '/api/v1/push', { items => [ { queue => 'boom', payload => {} } ] });
is($st, 500, 'a push that raises inside answers 500');
is($doc->{error}, 'push failed: internal error; see the server log', 'with words saying what failed');
unlike($raw500, qr/secret|password|accounts/, 'and nothing of the PostgreSQL message');
my $deadline = time + 10;
usleep(100_000) while (slurp_file($node->logfile, $log_at) !~ /secret detail/ && time < $deadline);
like(slurp_file($node->logfile, $log_at), qr/push failed: secret detail: SELECT password FROM users.*\n.*DETAIL:  row 42 of accounts/,
	'the server log has the message and its detail');
$node->safe_psql('postgres', 'DROP TRIGGER boom ON queen.log_segments; DROP FUNCTION public.boom()');

(undef, my $metrics) = http($node, 'GET', '/metrics');
like($metrics, qr/queen_streams_http_requests_total\{route="push",code="500"\} 5/, '500s counted');
like($metrics, qr/queen_streams_http_requests_total\{route="push",code="413"\} 1/, '413s counted');

$node->stop;
done_testing();
