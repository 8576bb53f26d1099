# The example worker (examples/window_counter.pl) end to end over HTTP only:
# tumbling-window counts per key are exact, one sink message per window,
# even when the worker is killed with SIGKILL halfway and started again.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use IPC::Run;
use JSON::PP;
use POSIX qw(floor strftime);
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = qs_node('example');
my $url = "http://127.0.0.1:$node->{qs_http_port}";
my $example = "$FindBin::Bin/../../examples/window_counter.pl";

# 600 events, ascending event time over six one-minute windows, four keys,
# three partitions; pushed over HTTP 40 at a time.
my $base = 1_700_000_040_000;
my (@items, %want);
srand(42);
my @events = sort { $a->[0] <=> $b->[0] }
  map { [ $base + int(rand(6 * 60_000)), (qw(a b c d))[ int(rand(4)) ], (qw(p1 p2 p3))[ int(rand(3)) ] ] }
  1 .. 600;
for my $e (@events)
{
	my ($ts, $key, $part) = @$e;
	push @items, { queue => 'clicks', partition => $part, payload => { key => $key, ts => $ts } };
	my $ws = floor($ts / 60_000) * 60_000;
	my $iso = strftime('%Y-%m-%dT%H:%M:%S.000Z', gmtime($ws / 1000));
	$want{"$part/$key/$iso"}++;
}
while (my @chunk = splice(@items, 0, 40))
{
	my ($st) = http_json($node, 'POST', '/api/v1/push', { items => \@chunk });
	die "push failed: $st" unless $st == 201;
}

my @args = ($^X, $example, '--url', $url, '--source', 'clicks', '--sink', 'clicks.per_minute',
	'--batch', '13', '--lease', '2', '--idle-flush', '1');

# First run: killed with SIGKILL once a few cycles have committed.
my $h = IPC::Run::start([ @args ], '>', \my $out1, '2>', \my $err1);
ok($node->poll_query_until('postgres',
	"SELECT coalesce(sum(cycles), 0) >= 5 FROM queen_streams.metrics WHERE queue = 'clicks'"),
	'the first run commits cycles');
$h->signal('KILL');
eval { $h->finish };
my $after_kill = $node->safe_psql('postgres',
	"SELECT sum(cycles) FROM queen_streams.metrics WHERE queue = 'clicks'");
note("killed after $after_kill cycles");

# Second run: to the end (exits after 5 idle seconds, once the kill's leases expired).
my ($out2, $err2);
IPC::Run::run([ @args, '--exit-idle', '5' ], '>', \$out2, '2>', \$err2,
	IPC::Run::timeout(120)) or diag "second run: $err2";
is($err2 // '', '', 'the second run reports no failed cycle');

my %got;
my $messages = 0;
while (1)
{
	my $r = json_sql($node,
		"queen.pop('clicks.per_minute', batch => 1000, auto_ack => true, partitions => 10)");
	last unless @{ $r->{messages} };
	for my $m (@{ $r->{messages} })
	{
		$messages++;
		$got{"$m->{partition}/$m->{data}{key}/$m->{data}{windowStart}"} += $m->{data}{count};
	}
}
is_deeply(\%got, \%want, 'every window count is exact');
is($messages, scalar keys %want, 'one sink message per (partition, key, window)');
is($node->safe_psql('postgres',
	"SELECT count(*) FROM queen_streams.state s JOIN queen_streams.queries q ON q.id = s.query_id"
	  . " WHERE q.name = 'clicks.per_minute' AND s.key <> '__wm__'"),
	'0', 'no open window left in state');
my (undef, $metrics) = http($node, 'GET', '/metrics');
like($metrics, qr/queen_streams_queue_acked_messages_total\{[^}]*queue="clicks"\} 600\n/,
	'all 600 source messages acked once, in cycles');

$node->stop;
done_testing();
