# Hostile HTTP framing (issue 13, point 4), over raw sockets: every request
# gets exactly one answer with the status RFC 9112 gives it, promptly, and
# nothing after a refused head is served as a second request. See
# src/http/screen.c for what is checked before libmicrohttpd sees a
# connection, and router.c for the same rules on keep-alive requests.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use IO::Socket::INET;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = qs_node('hostile', "queen_streams.max_body_bytes = 65536\n"
	. "queen_streams.header_timeout = 1500\nqueen_streams.body_timeout = 20000\n");
my $port = $node->{qs_http_port};

# Every status line in what came back (a second answer may follow a body on the same line).
sub statuses { my @s = $_[0] =~ m{HTTP/1\.[01] (\d{3}) }g; return @s; }

# One raw request; checks that exactly one answer with `status` came, within 5 s.
sub one_answer
{
	my ($name, $bytes, $status, $body_re) = @_;
	my $t0 = time;
	my $out = raw_request($node, $bytes, 8);
	my $took = time - $t0;
	my @s = statuses($out);
	is(join(',', @s), $status, "$name: answered $status, once");
	ok($took < 5, sprintf("$name: promptly (%.1f s)", $took));
	like($out, $body_re, "$name: body") if $body_re;
	return $out;
}

my $json_push = '{"items":[]}';
my $len = length $json_push;

# ---- request line and head sizes
# (a head's fields and parameters must fit libmicrohttpd's pool: about
# 400 with the default max_header_bytes; more answer 431 or 414)
my $args = join('&', map { "a$_=$_" } 0 .. 299);
one_answer('300 query parameters', "GET /health?$args HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 200);
$args = join('&', map { "a$_=$_" } 0 .. 999);
ok(length($args) > 3900 && length($args) < 16384, 'a thousand query parameters, under the header limit');
one_answer('1000 query parameters (more than the pool holds)',
	"GET /health?$args HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 414, qr/too many query parameters/);
my $many = join('&', map { "a$_" } 0 .. 2499);
one_answer('2500 query parameters (more than the listener keeps)',
	"GET /health?$many HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 414, qr/too many query parameters/);
one_answer('a request target over the header limit',
	"GET /health?x=" . ('y' x 17000) . " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 414);
my $headers = join('', map { "X-H$_: v\r\n" } 1 .. 300);
one_answer('300 small headers', "GET /health HTTP/1.1\r\nHost: x\r\n${headers}Connection: close\r\n\r\n", 200);
$headers = join('', map { "X-H$_: v\r\n" } 1 .. 900);
ok(length($headers) > 8000 && length($headers) < 16384, '900 small headers, under the header limit');
one_answer('900 small headers (more than the pool holds)',
	"GET /health HTTP/1.1\r\nHost: x\r\n${headers}Connection: close\r\n\r\n", 431, qr/too many header fields/);
one_answer('2500 tiny headers', "GET /health HTTP/1.1\r\nHost: x\r\n" . join('', map { "A$_:\r\n" } 1 .. 2500)
	. "Connection: close\r\n\r\n", 431);
one_answer('headers over the header limit',
	"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " . ('v' x 17000) . "\r\nConnection: close\r\n\r\n", 431);

# ---- transfer codings and chunk sizes
one_answer('chunk size FFFFFFFFFFFFFFFF',
	"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFF\r\nabc", 413);
one_answer('chunk size of 17 digits',
	"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1FFFFFFFFFFFFFFFF\r\nabc", 413);
one_answer('a first chunk above max_body_bytes',
	"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n20000\r\nabc", 413);
one_answer('a chunk size that is not hex',
	"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc", 400);
one_answer('Transfer-Encoding: gzip', "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nabc", 501);
one_answer('Transfer-Encoding: gzip, chunked',
	"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501);
one_answer('a well-formed chunked push',
	"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
	. sprintf("%x\r\n%s\r\n0\r\n\r\n", $len, $json_push), 201);
# a chunked body that grows past max_body_bytes, chunk by chunk: 413, not a dropped connection
one_answer('chunked body past max_body_bytes',
	"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	. join('', map { "1000\r\n" . ('x' x 4096) . "\r\n" } 1 .. 20), 413, qr/request body too large/);
# a bad chunk after good ones (libmicrohttpd's own finding): answered 400, not dropped
one_answer('a malformed second chunk',
	"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\nzz\r\nabc\r\n", 400);

# ---- Content-Length
one_answer('Content-Length: -1', "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400,
	qr/invalid Content-Length/);
one_answer('Content-Length: abc', "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400);
one_answer('Content-Length: 2, 2', "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: 2, 2\r\n\r\n{}", 400);
one_answer('two different Content-Length headers',
	"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: $len\r\nConnection: close\r\n\r\n{}$json_push",
	400, qr/conflicting Content-Length/);
one_answer('two equal Content-Length headers',
	"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: $len\r\nContent-Length: $len\r\nConnection: close\r\n\r\n$json_push",
	201);
my $smuggle = one_answer('Content-Length with chunked (a smuggling shape)',
	"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
	. "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 400, qr/Transfer-Encoding/);
unlike($smuggle, qr/"status"/, 'the bytes after it are not served as a request');

# ---- Host
one_answer('HTTP/1.1 without Host', "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n", 400, qr/Host header is required/);
one_answer('two Host headers', "GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n", 400);
one_answer('HTTP/1.0 without Host', "GET /health HTTP/1.0\r\n\r\n", 200);

# ---- the same rules on a keep-alive connection's later requests
for my $c (
	[ 'no Host', "GET /health HTTP/1.1\r\n\r\n", 400 ],
	[ 'Content-Length with chunked',
	  "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
	  . "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 400 ],
	[ 'Transfer-Encoding: gzip', "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nabc", 501 ],
	[ 'two Content-Length', "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{} ", 400 ])
{
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp') or die;
	$s->autoflush(1);
	print $s "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
	my $first = '';
	while ($first !~ /\r\n\r\n/ || length($first) < index($first, "\r\n\r\n") + 4 + ($first =~ /Content-Length: (\d+)/i)[0])
	{
		my $n = sysread($s, $first, 4096, length $first);
		last unless $n;
	}
	print $s $c->[1];
	my $out = '';
	my $deadline = time + 8;
	$s->blocking(0);
	while (time < $deadline)
	{
		my $n = sysread($s, my $b, 65536);
		last if defined $n && $n == 0;
		if (defined $n) { $out .= $b; next; }
		usleep(20_000);
	}
	is(join(',', statuses($first . $out)), "200,$c->[2]",
		"keep-alive, second request with $c->[0]: 200 then $c->[2], nothing more, then closed");
}

# ---- a slow head is told, not just cut off
{
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp') or die;
	print $s "GET /health HTTP/1.1\r\nHost: x\r\n";
	my $t0 = time;
	my $out = '';
	while (1) { my $n = sysread($s, my $b, 4096); last unless $n; $out .= $b; }
	is(join(',', statuses($out)), '408', 'a head not complete within header_timeout: 408');
	ok(time - $t0 < 5, 'at the header timeout');
}

# ---- a whole 64 MB body sent without Expect: 100-continue still reads its 413
{
	local $SIG{PIPE} = 'IGNORE';
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp') or die;
	my $total = 64 * 1024 * 1024;
	print $s "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: $total\r\n\r\n";
	my $chunk = 'x' x 65536;
	my ($sent, $err) = (0, undef);
	while ($sent < $total)
	{
		my $w = syswrite($s, $chunk);
		if (!defined $w) { $err = "$!"; last; }
		$sent += $w;
	}
	is($sent, $total, 'the client wrote its whole body: the server read it, no reset') or diag("write error: $err");
	my $out = '';
	while (1) { my $n = sysread($s, my $b, 65536); last unless $n; $out .= $b; }
	is(join(',', statuses($out)), '413', 'and then read the 413');
	like($out, qr/request body too large/, 'with its body');
}

# the listener is fine after all of it
my ($st) = http_json($node, 'GET', '/health');
is($st, 200, 'still serving');

$node->stop;
done_testing();
