# The HTTP workers as processes: visible in pg_stat_activity, SIGTERM ends
# one promptly and it comes back, SIGKILL (a crash restart) recovers,
# DROP DATABASE and DROP EXTENSION are not blocked by idle or parked
# workers, routes answer 503 without the extension and work once it is back.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use IO::Socket::INET;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = qs_node('processes', "restart_after_crash = on\n");

is($node->safe_psql('postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queen_streams http'"),
	'2', 'two workers in pg_stat_activity');

sub worker_pids
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(pid::text, ',' ORDER BY worker) FROM queen_streams.http_workers()");
}

sub read_all
{
	my ($s, $timeout) = @_;
	my $out = '';
	my $deadline = time + $timeout;
	$s->blocking(0);
	while (time < $deadline)
	{
		my $n = sysread($s, my $buf, 65536);
		last if defined $n && $n == 0;
		if (defined $n) { $out .= $buf; last if $out =~ /\r\n\r\n/ && $out =~ /^HTTP\S+ 204/; next; }
		usleep(20_000);
	}
	return $out;
}

# ---- DROP DATABASE is not blocked by idle workers, nor by a parked pop
my $parked = park_pop($node, "/api/v1/pop/queue/waiting?wait=true&timeout=20000");
usleep(300_000);
is($node->safe_psql('postgres',
	'SELECT sum(parked_pops) FROM queen_streams.http_workers()'), '1', 'a pop is parked');
$node->safe_psql('postgres', 'CREATE DATABASE other');
my $t0 = time;
my ($rc, $out, $err) = $node->psql('postgres', 'DROP DATABASE other',
	extra_params => [ '-c', 'SET statement_timeout = 20000' ]);
is($rc, 0, 'DROP DATABASE completes') or diag $err;
ok(time - $t0 < 5, sprintf('and promptly (%.2f s)', time - $t0));

# ---- DROP EXTENSION is not blocked; routes answer 503 until it is back
$t0 = time;
($rc, $out, $err) = $node->psql('postgres', 'DROP EXTENSION queen_streams',
	extra_params => [ '-c', 'SET lock_timeout = 10000' ]);
is($rc, 0, 'DROP EXTENSION completes') or diag $err;
ok(time - $t0 < 5, sprintf('and promptly (%.2f s)', time - $t0));
my ($st, $doc, $hdr) = http_json($node, 'POST', '/api/v1/push', { items => [] });
is($st, 503, 'without the extension a route answers 503');
like($doc->{error}, qr/queen_streams is not installed in database "postgres"/, 'saying why');
ok(defined $hdr->{'retry-after'}, 'with Retry-After');
($st, $doc) = http_json($node, 'GET', '/health');
is($st, 503, 'health answers 503 too');
my $answer = read_all($parked, 5);
like($answer, qr{^HTTP/1\.1 503}, 'the parked pop, rechecking, learns of it');
close $parked;

$node->safe_psql('postgres', 'CREATE EXTENSION queen_streams');
($st, $doc) = http_json($node, 'POST', '/api/v1/push', { items => [ { queue => 'back', payload => {} } ] });
is($st, 201, 'once created again, routes work (same workers, plans revalidated)');
($st) = http_json($node, 'GET', '/api/v1/pop/queue/back');
is($st, 200, 'and pop too');

# ---- SIGTERM ends a worker promptly; it is started again
my ($pid0) = split /,/, worker_pids();
$t0 = time;
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid0)");
my $gone;
while (time - $t0 < 10)
{
	if (!kill(0, $pid0)) { $gone = time - $t0; last; }
	usleep(20_000);
}
ok(defined $gone && $gone < 2, sprintf('SIGTERM ends the worker promptly (%.2f s)', $gone // -1));
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 2 AND bool_and(listening) AND NOT bool_or(pid = $pid0)"
	  . " FROM queen_streams.http_workers()"), 'the worker is started again');
($st) = http_json($node, 'GET', '/health');
is($st, 200, 'and the listener serves');

# ---- SIGKILL: the postmaster restarts everything, the listener serves again
my ($victim) = split /,/, worker_pids();
kill 'KILL', $victim;
my $served;
my $deadline = time + 60;
while (time < $deadline)
{
	my ($s) = http_json($node, 'GET', '/health');
	my $pids = eval { worker_pids() } // '';
	if ($s == 200 && $pids ne '' && $pids !~ /\b$victim\b/) { $served = 1; last; }
	usleep(200_000);
}
ok($served, 'after SIGKILL of a worker the listener serves again');
($st, $doc) = http_json($node, 'POST', '/api/v1/push', { items => [ { queue => 'after', payload => {} } ] });
is($st, 201, 'push works after the crash restart');
like($node->safe_psql('postgres', 'SELECT count(*) FROM queen_streams.http_workers() WHERE listening'),
	qr/^2$/, 'both workers listening');

$node->stop;
done_testing();
