# Secrets from files, tenancy that fails closed under auth = jwt, and strict
# JWT claims (issue 37, parts 5, 6 and 7b):
# - queen_streams.jwt_secret_file and encryption_key_file are read at start
#   and on SIGHUP, checked like ssl_key_file, and their contents never reach
#   the server log (even at log_min_messages = debug2); the inline
#   jwt_secret is written there by a reload, as the README says;
# - with tenancy = header a token without the tenant claim is refused (403)
#   unless jwt_trust_tenant_header; an admin route that spans tenants
#   (maintenance) needs a server-wide admin (tenant claim "*");
# - a string nbf or iat, and any crit header, answer 401.
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
use Time::HiRes qw(usleep);

my $json = JSON::PP->new->canonical;
my $dir = PostgreSQL::Test::Utils::tempdir();

sub b64url { my $s = encode_base64(shift, ''); $s =~ tr{+/}{-_}; $s =~ s/=+$//; return $s; }

sub hs256
{
	my ($claims, $secret, $header) = @_;
	my $input = b64url($json->encode($header // { alg => 'HS256', typ => 'JWT' })) . '.'
	  . b64url($json->encode($claims));
	return "$input." . b64url(hmac_sha256($input, $secret));
}

sub put_file
{
	my ($path, $text, $mode) = @_;
	open(my $f, '>', $path) or die "open $path: $!";
	print $f $text;
	close $f;
	chmod($mode // 0600, $path) or die "chmod $path: $!";
}

my $secret1 = 'file-secret-one-5b1c9e';
my $secret2 = 'file-secret-two-77d0aa';
my $inline = 'inline-secret-3f8e21';
my $logged = 'inline-logged-secret-c4d2';
my $hexkey = '9f' x 31 . 'a1';
put_file("$dir/jwt.secret", "$secret1\n");
put_file("$dir/enc.key", "$hexkey\n");

my $later = time + 3600;
my $node = qs_node('secrets', "queen_streams.auth = jwt\n"
	. "queen_streams.jwt_secret = '$inline'\n"
	. "queen_streams.jwt_secret_file = '$dir/jwt.secret'\n"
	. "queen_streams.encryption_key_file = '$dir/enc.key'\n"
	. "log_min_messages = debug2\n");

sub call
{
	my ($method, $path, $body, $token, $tenant) = @_;
	my %h;
	$h{authorization} = "Bearer $token" if defined $token;
	$h{'x-queen-tenant'} = $tenant if defined $tenant;
	return http_json($node, $method, $path, $body, \%h);
}

# Poll a request until it answers `want` (a reload reaches the workers a bit later).
sub until_status
{
	my ($want, @req) = @_;
	my $deadline = time + 20;
	my @r;
	do { @r = call(@req); usleep(100_000) if $r[0] != $want } while ($r[0] != $want && time < $deadline);
	return @r;
}

sub log_text { return slurp_file($node->logfile); }

# The error of an answer (a successful push answers an array).
sub err { my ($doc) = @_; return ref $doc eq 'HASH' ? $doc->{error} : undef; }

# ====================================================================== secrets from files
my ($st, $doc);
($st) = call('GET', '/api/v1/resources/queues', undef, hs256({ role => 'read-only', exp => $later }, $secret1));
is($st, 200, 'a token signed with the file\'s secret (less its newline) verifies');
($st) = call('GET', '/api/v1/resources/queues', undef, hs256({ role => 'read-only', exp => $later }, $inline));
is($st, 401, 'with both set, the file wins: the inline secret does not verify');
is($node->safe_psql('postgres',
	"SELECT queen_streams.verify_token('" . hs256({ role => 'admin' }, $secret1) . "')->>'valid'"),
	'true', 'a backend reads the file too (verify_token)');

# the encryption key from its file: a push to an encrypted queue is stored encrypted
$node->safe_psql('postgres', q{SELECT queen.configure('{"queue":"enc","options":{"encryptionEnabled":true}}')});
($st) = call('POST', '/api/v1/push', { items => [ { queue => 'enc', payload => { card => 'plain-4111' } } ] },
	hs256({ role => 'read-write', exp => $later }, $secret1));
is($st, 201, 'encryption_key_file: a push to an encrypted queue is accepted');
($st, $doc) = call('GET', '/api/v1/pop/queue/enc?autoAck=true', undef, hs256({ role => 'read-write', exp => $later }, $secret1));
is($doc->{messages}[0]{data}{card}, 'plain-4111', 'and pops decrypted');

# rotate: new contents, same path, one reload
put_file("$dir/jwt.secret", "$secret2\r\n");
$node->reload;
($st) = until_status(200, 'GET', '/api/v1/resources/queues', undef, hs256({ role => 'read-only', exp => $later }, $secret2));
is($st, 200, 'after SIGHUP the rotated file verifies (same path)');
($st) = call('GET', '/api/v1/resources/queues', undef, hs256({ role => 'read-only', exp => $later }, $secret1));
is($st, 401, 'and the old secret no longer does');

# permissions, like ssl_key_file: group-readable, world-readable, not a regular file, missing
put_file("$dir/group.secret", "x\n", 0640);
put_file("$dir/world.secret", "x\n", 0604);
put_file("$dir/empty.secret", "\n");
put_file("$dir/bad.key", "not hex\n");
system('mkfifo', '-m', '0600', "$dir/fifo.secret") == 0 or die "mkfifo failed";
for my $c (
	[ 'jwt_secret_file', "$dir/group.secret", qr/has group or world access/ ],
	[ 'jwt_secret_file', "$dir/world.secret", qr/has group or world access/ ],
	[ 'jwt_secret_file', $dir, qr/is not a regular file/ ],
	[ 'jwt_secret_file', "$dir/fifo.secret", qr/is not a regular file/ ],
	[ 'jwt_secret_file', "$dir/missing.secret", qr/Could not open the file: No such file/ ],
	[ 'jwt_secret_file', "$dir/empty.secret", qr/The file is empty/ ],
	[ 'encryption_key_file', "$dir/bad.key", qr/64 hexadecimal digits/ ])
{
	my ($ret, $out, $err) = $node->psql('postgres', "ALTER SYSTEM SET queen_streams.$c->[0] = '$c->[1]'");
	isnt($ret, 0, "$c->[0] = " . ($c->[1] =~ s{.*/}{}r) . ': refused');
	like($err, $c->[2], '... saying why');
}

# a reload that finds the file's permissions wrong keeps the secret it had, and says so
chmod(0644, "$dir/jwt.secret") or die;
$node->reload;
my $refused = qr/invalid value for parameter "queen_streams.jwt_secret_file": "\Q$dir\E\/jwt.secret"\n.*DETAIL:  The file has group or world access/;
my $deadline = time + 20;
usleep(100_000) until log_text() =~ $refused || time > $deadline;
like(log_text(), $refused, 'a reload with a world-readable file logs the path and why');
($st) = call('GET', '/api/v1/resources/queues', undef, hs256({ role => 'read-only', exp => $later }, $secret2));
is($st, 200, 'and the secret read before stays in use');
chmod(0600, "$dir/jwt.secret") or die;

my $log = log_text();
like($log, qr/jwt_secret_file/, 'the log does name the setting');
for my $s ([ 'first file secret', $secret1 ], [ 'rotated file secret', $secret2 ], [ 'encryption key', $hexkey ],
	[ 'inline secret', $inline ])
{
	unlike($log, qr/\Q$s->[1]\E/, "the $s->[0] is nowhere in the server log");
}

# the inline setting's old behaviour, documented: a reload that changes it logs it
$node->append_conf('postgresql.conf', "queen_streams.jwt_secret = '$logged'\n");
$node->reload;
$deadline = time + 20;
usleep(100_000) until log_text() =~ /\Q$logged\E/ || time > $deadline;
like(log_text(), qr/parameter "queen_streams.jwt_secret" changed to "\Q$logged\E"/,
	'the inline jwt_secret is written to the log by a reload (README: use jwt_secret_file)');

# ====================================================================== tenancy fails closed
my $A = '11111111-1111-4111-8111-111111111111';
my $B = '22222222-2222-4222-8222-222222222222';
my $push = { items => [ { queue => 'tq', payload => {} } ] };
my $rw = hs256({ role => 'read-write', exp => $later }, $secret2);
my $admin = hs256({ role => 'admin', exp => $later }, $secret2);

$node->append_conf('postgresql.conf', "queen_streams.tenancy = header\n");
$node->reload;
# a read first, until a worker has the new setting, and a moment for the
# other worker (the reload reaches both at once): a push sent before a
# worker reloads would be served, and write, under the old setting
until_status(403, 'GET', '/api/v1/resources/queues', undef, $rw, $A);
usleep(500_000);
($st, $doc) = call('POST', '/api/v1/push', $push, $rw, $A);
is($st, 403, 'tenancy = header, no jwt_tenant_claim: a token is not trusted with the header\'s tenant');
is(err($doc), 'the token names no tenant', 'error says why');
($st) = call('POST', '/api/v1/system/maintenance', { enabled => JSON::PP::true }, $admin, $A);
is($st, 403, 'nor is an admin token without a tenant');
is($node->safe_psql('postgres', "SELECT count(*) FROM queen.queues WHERE name = 'tq'"), '0', 'nothing was written');

$node->append_conf('postgresql.conf', "queen_streams.jwt_tenant_claim = 'tenant'\n");
$node->reload;
my $adminA = hs256({ role => 'admin', exp => $later, tenant => $A }, $secret2);
my $adminB = hs256({ role => 'admin', exp => $later, tenant => $B }, $secret2);
my $wide = hs256({ role => 'admin', exp => $later, tenant => '*' }, $secret2);
($st) = until_status(201, 'POST', '/api/v1/push', $push, $adminA, $A);
is($st, 201, 'a token of tenant A pushes as A');
($st) = call('POST', '/api/v1/push', $push, $adminB, $B);
is($st, 201, 'a token of tenant B pushes as B');
my $maint = $node->safe_psql('postgres', "SELECT queen.maintenance('push')::text");
($st, $doc) = call('POST', '/api/v1/system/maintenance', { enabled => JSON::PP::true }, $adminA, $A);
is($st, 403, 'an admin of tenant A cannot switch maintenance on for every tenant');
is(err($doc), 'the route acts on every tenant: it needs a server-wide admin token', 'error says why');
is($node->safe_psql('postgres', "SELECT queen.maintenance('push')::text"), $maint, 'maintenance unchanged');
($st) = call('GET', '/api/v1/system/maintenance', undef, $adminA, $A);
is($st, 403, 'nor read it');
($st) = call('DELETE', '/api/v1/resources/queues/tq', undef, $adminA, $B);
is($st, 403, 'an admin of A cannot delete B\'s queue');
($st) = call('DELETE', '/api/v1/resources/queues/tq', undef, $adminA, $A);
is($st, 200, 'an admin of A deletes its own queue');
is($node->safe_psql('postgres', "SELECT string_agg(tenant_id::text, ',') FROM queen.queues WHERE name = 'tq'"),
	$B, 'B\'s queue of the same name is still there');
($st) = call('POST', '/api/v1/push', $push, hs256({ role => 'read-write', exp => $later, tenant => '*' }, $secret2), $A);
is($st, 403, 'the tenant "*" is only for admin tokens');
($st) = call('POST', '/api/v1/push', $push, hs256({ role => 'read-write', exp => $later, tenant => 7 }, $secret2), $A);
is($st, 403, 'a tenant claim that is not a string is refused');

# a server-wide admin: role admin and tenant "*"
($st, $doc) = call('POST', '/api/v1/system/maintenance', { enabled => JSON::PP::true }, $wide);
is($st, 200, 'a server-wide admin switches maintenance on');
isnt($node->safe_psql('postgres', "SELECT queen.maintenance('push')::text"), $maint, 'it is on');
($st) = call('POST', '/api/v1/system/maintenance', { enabled => JSON::PP::false }, $wide, $B);
is($st, 200, 'and off again (with any tenant header)');
($st, undef, undef, my $text) = call('GET', '/metrics', undef, $adminA, $A);
is($st, 200, 'an admin of A reads /metrics');
unlike($text, qr/queen_streams_http_requests_total/, 'without the listener-wide series');
($st, undef, undef, $text) = call('GET', '/metrics', undef, $wide, $A);
like($text, qr/queen_streams_http_requests_total/, 'a server-wide admin sees them');

# the compatibility switch: the header is trusted, an admin without a tenant is server-wide
$node->append_conf('postgresql.conf', "queen_streams.jwt_trust_tenant_header = on\n");
$node->reload;
($st) = until_status(201, 'POST', '/api/v1/push', $push, $rw, $A);
is($st, 201, 'jwt_trust_tenant_header: a token without the claim acts for the header\'s tenant');
($st) = call('GET', '/api/v1/system/maintenance', undef, $admin, $A);
is($st, 200, 'and an admin token without the claim is server-wide');
($st) = call('POST', '/api/v1/push', $push, $adminA, $B);
is($st, 403, 'a token that names a tenant is still held to it');
($st) = call('POST', '/api/v1/push', $push, hs256({ role => 'read-write', exp => $later, tenant => 7 }, $secret2), $A);
is($st, 403, 'and so is a tenant claim that is not a string');

# ====================================================================== strict claims over HTTP
my $now = time;
for my $c (
	[ 'a string nbf', { role => 'read-only', nbf => "$now" }, undef, 'token nbf is not a number' ],
	[ 'a string iat', { role => 'read-only', iat => "$now" }, undef, 'token iat is not a number' ],
	[ 'a string exp', { role => 'read-only', exp => "$later" }, undef, 'token exp is not a number' ],
	[ 'a crit header', { role => 'read-only' }, { alg => 'HS256', crit => ['exp'], exp => $later },
	  'token has a critical header that is not understood' ])
{
	($st, $doc) = call('GET', '/api/v1/resources/queues', undef, hs256($c->[1], $secret2, $c->[2]), $A);
	is($st, 401, "$c->[0]: 401");
	is(err($doc), $c->[3], "$c->[0]: error");
}
($st) = call('GET', '/api/v1/resources/queues', undef,
	hs256({ role => 'read-only', nbf => $now - 10, iat => $now - 10 }, $secret2), $A);
is($st, 200, 'numeric nbf and iat in the past: 200');

# ====================================================================== a file refused at start
# the setting is left unset with a WARNING; the inline secret (set too) is used
$node->stop;
chmod(0644, "$dir/jwt.secret") or die;
$node->start;
wait_http($node);
like(log_text(), qr/WARNING:  invalid value for parameter "queen_streams.jwt_secret_file": "\Q$dir\E\/jwt.secret"/,
	'at start a world-readable file is a WARNING naming the path');
($st) = call('GET', '/api/v1/resources/queues', undef, hs256({ role => 'read-only' }, $secret2), $A);
is($st, 401, 'and its secret is not used');
($st) = call('GET', '/api/v1/resources/queues', undef, hs256({ role => 'read-only' }, $logged), $A);
is($st, 200, 'the inline setting is, as when the file setting is unset');
unlike(log_text(), qr/\Q$secret2\E/, 'the file\'s contents are still nowhere in the log');

$node->stop;
done_testing();
