# Access levels over HTTP (queen_streams.auth = jwt): bearer tokens (HS256 and
# RS256), 401 with a challenge, 403 below a route's level, the token's sub as
# producerSub, the admin routes, and settings reloaded on SIGHUP.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use Digest::SHA qw(hmac_sha256);
use JSON::PP;
use MIME::Base64 qw(encode_base64);
use PostgreSQL::Test::Utils;
use Test::More;

my $json = JSON::PP->new->canonical;
my $dir = PostgreSQL::Test::Utils::tempdir();

# An RSA key pair for RS256.
system("openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out $dir/priv.pem 2>/dev/null") == 0
  or die "openssl genpkey failed";
system("openssl pkey -in $dir/priv.pem -pubout -out $dir/pub.pem") == 0 or die "openssl pkey failed";

sub b64url { my $s = encode_base64(shift, ''); $s =~ tr{+/}{-_}; $s =~ s/=+$//; return $s; }

sub hs256
{
	my ($claims, $secret, $header) = @_;
	my $input = b64url($json->encode($header // { alg => 'HS256', typ => 'JWT' })) . '.'
	  . b64url($json->encode($claims));
	return "$input." . b64url(hmac_sha256($input, $secret // 'tap-secret'));
}

# An HS256 token over raw header and payload JSON text (numbers JSON::PP cannot write).
sub hs256_raw
{
	my ($header, $payload, $secret) = @_;
	my $input = b64url($header) . '.' . b64url($payload);
	return "$input." . b64url(hmac_sha256($input, $secret // 'tap-secret'));
}

sub rs256
{
	my ($claims) = @_;
	my $input = b64url($json->encode({ alg => 'RS256', typ => 'JWT' })) . '.' . b64url($json->encode($claims));
	open(my $fh, '>', "$dir/input") or die;
	print $fh $input;
	close $fh;
	my $sig = `openssl dgst -sha256 -sign $dir/priv.pem -binary $dir/input`;
	return "$input." . b64url($sig);
}

my $later = time + 3600;
my $deadline;
my %tok = map { $_ => hs256({ sub => "svc-$_", role => $_, exp => $later }) }
  qw(read-only read-write admin write-only);

my $node = qs_node('auth', "queen_streams.auth = jwt\n"
	. "queen_streams.jwt_secret = 'tap-secret'\n"
	. "queen_streams.jwt_public_key_file = '$dir/pub.pem'\n");

sub call
{
	my ($method, $path, $body, $token) = @_;
	return http_json($node, $method, $path, $body,
		defined $token ? { authorization => "Bearer $token" } : {});
}

# ---- no token, bad tokens: 401 with a challenge; /health needs none
my ($st, $doc, $hdr) = call('GET', '/health');
is($st, 200, '/health needs no token');
($st, $doc, $hdr) = call('POST', '/api/v1/push', { items => [] });
is($st, 401, 'no token: 401');
like($hdr->{'www-authenticate'}, qr/^Bearer realm="queen"/, 'with a Bearer challenge');
is($doc->{error}, 'a bearer token is required', 'error says why');
($st, $doc, $hdr) = http_json($node, 'POST', '/api/v1/push', { items => [] },
	{ authorization => "Basic dXNlcjpwYXNz" });
is($st, 401, 'a Basic credential is not a bearer token');

my $pub = do { local $/; open(my $f, '<', "$dir/pub.pem") or die; <$f> };
my @bad = (
	[ 'expired', hs256({ role => 'admin', exp => time - 300 }), 'token expired' ],
	[ 'not yet valid', hs256({ role => 'admin', nbf => time + 300 }), 'token not yet valid' ],
	[ 'wrong signature', hs256({ role => 'admin' }, 'other-secret'), 'bad signature' ],
	[ 'alg none', b64url('{"alg":"none"}') . '.' . b64url('{"role":"admin"}') . '.', 'unsupported token algorithm' ],
	[ 'garbage', 'not-a-token', 'malformed token' ],
	[ 'HS256 signed with the RSA public key (algorithm confusion)',
	  hs256({ role => 'admin' }, $pub), 'bad signature' ],
);
push @bad,
  [ 'a header number out of numeric range, unsigned',
	b64url('{"alg":"HS256","x":1e999999999}') . '.' . b64url('{"role":"admin"}') . '.AAAA', 'bad signature' ],
  [ 'an exp out of numeric range', hs256_raw('{"alg":"HS256"}', '{"role":"admin","exp":1e999999999}'),
	'token exp is not a number' ],
  [ 'a duplicate claim', hs256_raw('{"alg":"HS256"}', '{"role":"read-only","role":"admin"}'),
	'malformed token' ],
  [ 'a duplicate header member', hs256_raw('{"alg":"HS256","alg":"none"}', '{"role":"admin"}'),
	'malformed token' ],
  [ 'trailing bytes after the JSON', hs256_raw('{"alg":"HS256"}', '{"role":"admin"} x'), 'malformed token' ];
for my $b (@bad)
{
	($st, $doc, $hdr) = call('GET', '/metrics', undef, $b->[1]);
	is($st, 401, "$b->[0]: 401");
	is($doc->{error}, $b->[2], "$b->[0]: error");
	like($hdr->{'www-authenticate'}, qr/error="invalid_token"/, "$b->[0]: invalid_token challenge");
}

# A signed token whose header holds a number no numeric can hold: parsed without converting it
# (it used to raise inside token parsing and reset the connection); an unknown member is ignored.
($st) = call('GET', '/metrics', undef,
	hs256_raw('{"alg":"HS256","x":1e999999999}', qq({"role":"admin","exp":$later})));
is($st, 200, 'a header member 1e999999999 is parsed, not raised on: the signed token is answered');

# every refusal above is counted under its own code (401 used to be code="other")
my (undef, $text) = http($node, 'GET', '/metrics', undef, { authorization => "Bearer $tok{admin}" });
my ($n401) = $text =~ /^queen_streams_http_requests_total\{route="metrics",code="401"\} (\d+)$/m;
is($n401, scalar(@bad), 'each 401 of GET /metrics counted under code="401"');
unlike($text, qr/code="other"/, 'no status is counted as "other"');

# ---- each route at each level
my %need = (
	'POST /api/v1/push' => 'push',
	'GET /api/v1/pop/queue/lvl' => 'read-write',
	'POST /api/v1/ack' => 'read-write',
	'POST /api/v1/ack/batch' => 'read-write',
	'POST /api/v1/lease/0190a000-0000-7000-8000-000000000000/extend' => 'read-write',
	'POST /streams/v1/queries' => 'read-write',
	'POST /streams/v1/cycle' => 'read-write',
	'POST /streams/v1/state/get' => 'read-only',
	'POST /streams/v1/streams/s/pause' => 'read-write',
	'POST /streams/v1/streams/s/resume' => 'read-write',
	'GET /api/v1/dashboard/groups' => 'read-only',
	'GET /metrics' => 'read-only',
	'POST /api/v1/configure' => 'read-write',
	'DELETE /api/v1/resources/queues/lvl' => 'admin',
	'POST /api/v1/transaction' => 'read-write',
	'GET /api/v1/dlq' => 'read-only',
	'GET /api/v1/messages' => 'read-only',
	'GET /api/v1/messages/0190a000-0000-7000-8000-000000000000/t1' => 'read-only',
	'DELETE /api/v1/messages/0190a000-0000-7000-8000-000000000000/t1' => 'read-write',
	'POST /api/v1/messages/0190a000-0000-7000-8000-000000000000/t1/retry' => 'read-write',
	'GET /api/v1/consumer-groups' => 'read-only',
	'GET /api/v1/consumer-groups/lagging' => 'read-only',
	'GET /api/v1/consumer-groups/g' => 'read-only',
	'DELETE /api/v1/consumer-groups/g' => 'admin',
	'DELETE /api/v1/consumer-groups/g/queues/lvl' => 'admin',
	'POST /api/v1/consumer-groups/g/subscription' => 'read-write',
	'POST /api/v1/consumer-groups/g/queues/lvl/seek' => 'read-write',
	'POST /api/v1/consumer-groups/g/queues/lvl/partitions/Default/seek' => 'read-write',
	'GET /api/v1/system/maintenance' => 'admin',
	'POST /api/v1/system/maintenance' => 'admin',
	'GET /api/v1/system/maintenance/pop' => 'admin',
	'POST /api/v1/system/maintenance/pop' => 'admin',
	'GET /api/v1/status/buffers' => 'read-only',
	'GET /api/v1/resources/queues' => 'read-only',
	'GET /api/v1/resources/queues/lvl' => 'read-only',
	'GET /api/v1/resources/overview' => 'read-only',
	'GET /api/v1/resources/namespaces' => 'read-only',
	'GET /api/v1/resources/tasks' => 'read-only',
	'GET /api/v1/status' => 'read-only',
	'GET /api/v1/status/queues' => 'read-only',
	'GET /api/v1/status/queues/lvl' => 'read-only',
	'GET /api/v1/status/queues/lvl/messages' => 'read-only',
	'POST /api/v1/traces' => 'read-write',
	'GET /api/v1/traces/names' => 'read-only',
	'GET /api/v1/traces/by-name/n' => 'read-only',
	'GET /api/v1/traces/0190a000-0000-7000-8000-000000000000/t1' => 'read-only',
);
my %rank = ('read-only' => 1, 'read-write' => 2, admin => 3);
for my $route (sort keys %need)
{
	my ($method, $path) = split / /, $route;
	for my $role (qw(read-only read-write admin write-only))
	{
		my $allowed = $need{$route} eq 'push'
		  ? $role ne 'read-only'
		  : ($role ne 'write-only' && $rank{$role} >= $rank{ $need{$route} });
		my $body = $method eq 'POST' ? {} : undef;
		($st) = call($method, $path, $body, $tok{$role});
		if ($allowed)
		{
			ok($st != 401 && $st != 403, "$role may use $route (got $st)");
		}
		else
		{
			is($st, 403, "$role may not use $route");
		}
	}
}
($st, $doc) = call('POST', '/api/v1/push', { items => [] }, hs256({ sub => 'x' }));
is($st, 403, 'a valid token without a role grants nothing');
($st, $doc) = call('POST', '/api/v1/push', { items => [] }, hs256({ sub => 'x', role => 'root' }));
is($st, 403, 'an unknown role grants nothing');

# ---- the token's sub is the frame's producer sub, shown as producerSub
($st, $doc) = call('POST', '/api/v1/push',
	{ items => [ { queue => 'subq', payload => { n => 1 }, producerSub => 'forged' } ] }, $tok{'write-only'});
is($st, 201, 'write-only token pushes');
($st, $doc) = call('GET', '/api/v1/pop/queue/subq?autoAck=true', undef, $tok{'read-write'});
is($st, 200, 'read-write token pops');
is($doc->{messages}[0]{producerSub}, 'svc-write-only', 'producerSub is the pusher\'s token sub, not the body');
is($node->safe_psql('postgres',
	"SELECT f.flags & 2, f.producer_sub FROM queen.log_segments s"
	. " JOIN queen.log_partitions p ON p.id = s.partition_id JOIN queen.queues q ON q.id = p.queue_id,"
	. " queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f WHERE q.name = 'subq'"),
	'2|svc-write-only', 'stored in the frame with the PRODUCER_SUB flag');

# ---- RS256 and the admin routes
my $rs_admin = rs256({ sub => 'rsa-admin', role => 'admin', exp => $later });
($st, $doc) = call('POST', '/api/v1/configure',
	{ queue => 'cfgq', options => { leaseTime => 45, retryLimit => 7 } }, $rs_admin);
is($st, 200, 'RS256 admin token configures a queue');
is($doc->{options}{leaseTime}, 45, 'configure answers the options');
is($node->safe_psql('postgres', "SELECT lease_time || '/' || retry_limit FROM queen.queues WHERE name = 'cfgq'"),
	'45/7', 'stored');
($st, $doc) = call('POST', '/api/v1/configure', { queue => 'cfgq', options => { leaseTme => 1 } }, $rs_admin);
is($st, 200, 'an unknown option is dropped, as Queen does');
is_deeply($doc->{ignored}, ['leaseTme'], 'and listed under ignored');
($st, $doc) = call('DELETE', '/api/v1/resources/queues/cfgq', undef, $rs_admin);
is($st, 200, 'admin deletes a queue');
ok($doc->{deleted}, 'deleted');
($st, $doc) = call('DELETE', '/api/v1/resources/queues/cfgq', undef, $rs_admin);
is($st, 200, 'deleting it again: 200, as Queen');
is($doc->{existed}, JSON::PP::false, 'with existed false');
($st) = call('PUT', '/api/v1/resources/queues/cfgq', undef, $rs_admin);
is($st, 405, 'PUT on the queue route: 405');
($st, $doc) = call('GET', '/metrics', undef, rs256({ role => 'admin', exp => time - 300 }));
is($st, 401, 'expired RS256 token: 401');

# ---- tokens bound to a tenant, and required exp, iss and aud
my $ta = '11111111-1111-4111-8111-111111111111';
my $tb = '22222222-2222-4222-8222-222222222222';
$node->append_conf('postgresql.conf', "queen_streams.tenancy = header\n"
	. "queen_streams.jwt_tenant_claim = 'tenant'\n");
$node->reload;
my $bound = hs256({ role => 'read-write', exp => $later, tenant => $ta });
$deadline = time + 10;
do { ($st) = http_json($node, 'GET', '/api/v1/pop/queue/tq', undef,
		{ authorization => "Bearer $bound", 'x-queen-tenant' => $tb }); select(undef, undef, undef, 0.1) }
  while ($st != 403 && time < $deadline);
is($st, 403, 'jwt_tenant_claim: a token for tenant A is refused for tenant B');
($st, $doc) = http_json($node, 'POST', '/api/v1/push', { items => [ { queue => 'tq', payload => {} } ] },
	{ authorization => "Bearer $bound", 'x-queen-tenant' => $tb });
is($st, 403, 'push too');
is($doc->{error}, 'the token does not grant this tenant', 'error says why');
($st) = http_json($node, 'POST', '/api/v1/push', { items => [ { queue => 'tq', payload => {} } ] },
	{ authorization => "Bearer $bound", 'x-queen-tenant' => uc $ta });
is($st, 201, 'and accepted for its own tenant (UUIDs compared as UUIDs)');
($st) = http_json($node, 'GET', '/api/v1/pop/queue/tq', undef, { authorization => "Bearer $bound" });
is($st, 403, 'no x-queen-tenant is the default tenant, not the token\'s');
($st) = http_json($node, 'GET', '/api/v1/pop/queue/tq', undef,
	{ authorization => "Bearer $tok{'read-write'}", 'x-queen-tenant' => $ta });
is($st, 403, 'a token without the claim is refused');
($st) = http_json($node, 'GET', '/api/v1/pop/queue/tq', undef,
	{ authorization => 'Bearer ' . hs256({ role => 'read-write', tenant => 'acme' }), 'x-queen-tenant' => $ta });
is($st, 403, 'a claim that is not a UUID is refused');
($st) = http_json($node, 'GET', '/health', undef, { 'x-queen-tenant' => $tb });
is($st, 200, '/health needs no token and no tenant');

$node->append_conf('postgresql.conf', "queen_streams.jwt_require_exp = on\n"
	. "queen_streams.jwt_issuer = 'https://issuer.example'\n"
	. "queen_streams.jwt_audience = 'queen'\n");
$node->reload;
my $good = hs256({ role => 'read-only', exp => $later, iss => 'https://issuer.example', aud => [ 'x', 'queen' ],
		tenant => $ta });
$deadline = time + 10;
do { ($st, $doc) = http_json($node, 'GET', '/metrics', undef,
		{ authorization => "Bearer $bound", 'x-queen-tenant' => $ta }); select(undef, undef, undef, 0.1) }
  while ($st != 401 && time < $deadline);
is($st, 401, 'jwt_issuer: a token without iss is refused');
is($doc->{error}, 'token issuer not accepted', 'error says why');
for my $c (
	[ 'no exp', { role => 'read-only', iss => 'https://issuer.example', aud => 'queen', tenant => $ta },
	  'token has no expiry' ],
	[ 'another issuer', { role => 'read-only', exp => $later, iss => 'https://evil.example', aud => 'queen',
		  tenant => $ta }, 'token issuer not accepted' ],
	[ 'another audience', { role => 'read-only', exp => $later, iss => 'https://issuer.example', aud => [ 'x' ],
		  tenant => $ta }, 'token audience not accepted' ])
{
	($st, $doc) = http_json($node, 'GET', '/metrics', undef,
		{ authorization => 'Bearer ' . hs256($c->[1]), 'x-queen-tenant' => $ta });
	is($st, 401, "$c->[0]: 401");
	is($doc->{error}, $c->[2], "$c->[0]: error");
}
($st) = http_json($node, 'GET', '/metrics', undef, { authorization => "Bearer $good", 'x-queen-tenant' => $ta });
is($st, 200, 'exp, iss, an aud array naming us and the tenant: 200');
$node->append_conf('postgresql.conf', "queen_streams.jwt_require_exp = off\n"
	. "queen_streams.jwt_issuer = ''\nqueen_streams.jwt_audience = ''\n"
	. "queen_streams.jwt_tenant_claim = ''\nqueen_streams.tenancy = off\n");
$node->reload;
$deadline = time + 10;
do { ($st) = call('GET', '/metrics', undef, $tok{'read-only'}); select(undef, undef, undef, 0.1) }
  while ($st != 200 && time < $deadline);
is($st, 200, 'settings back off after SIGHUP');

# ---- SIGHUP: a new secret takes effect, old tokens stop working
$node->append_conf('postgresql.conf', "queen_streams.jwt_secret = 'rotated'\n");
$node->reload;
my $new = hs256({ role => 'read-only', exp => $later }, 'rotated');
$deadline = time + 10;
do { ($st) = call('GET', '/metrics', undef, $new); select(undef, undef, undef, 0.1) }
  while ($st != 200 && time < $deadline);
is($st, 200, 'after SIGHUP the rotated secret verifies');
($st) = call('GET', '/metrics', undef, $tok{'read-only'});
is($st, 401, 'and the old one no longer does');

$node->append_conf('postgresql.conf', "queen_streams.auth = off\n");
$node->reload;
$deadline = time + 10;
do { ($st) = call('GET', '/metrics'); select(undef, undef, undef, 0.1) }
  while ($st != 200 && time < $deadline);
is($st, 200, 'auth = off after SIGHUP: no token needed');

$node->stop;
done_testing();
