# The dashboard (GET /) in a real browser: Debian's headless Chromium,
# driven by test/browser/dashboard.js (playwright-core, no browser download),
# against a node seeded over HTTP with auth = jwt and tenancy = header. Every
# view is loaded; the numbers it shows must equal what SQL says; a read-only
# token sees but may not act; an admin requeues and deletes dead letters,
# seeks a group to the end and toggles pop maintenance, and SQL sees each
# effect; the page makes no request outside the listener and breaks no CSP
# rule; another tenant sees only its own. Screenshots are kept under
# tmp_check/dashboard/screenshots (scripts/test.sh copies them to
# doc/screenshots). If Chromium cannot start, this fails.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use Digest::SHA qw(hmac_sha256);
use File::Path qw(rmtree);
use JSON::PP;
use MIME::Base64 qw(encode_base64);
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $json = JSON::PP->new->canonical;
sub b64url { my $s = encode_base64(shift, ''); $s =~ tr{+/}{-_}; $s =~ s/=+$//; return $s; }
sub hs256
{
	my ($claims) = @_;
	my $input = b64url($json->encode({ alg => 'HS256', typ => 'JWT' })) . '.' . b64url($json->encode($claims));
	return "$input." . b64url(hmac_sha256($input, 'dash-secret'));
}
my $later = time + 7200;
my %tok = map { $_ => hs256({ sub => "dash-$_", role => $_, exp => $later }) } qw(read-only admin);
my $TB = 'bbbbbbbb-0000-4000-8000-00000000000b';

my $node = qs_node('dashboard', "queen_streams.auth = jwt\n"
	. "queen_streams.jwt_secret = 'dash-secret'\n"
	. "queen_streams.tenancy = header\n"
	. "queen_streams.sample_interval = 2\n");
my $port = $node->{qs_http_port};

sub call
{
	my ($method, $path, $body, $tenant) = @_;
	my %h = (authorization => "Bearer $tok{admin}");
	$h{'x-queen-tenant'} = $tenant if $tenant;
	return http_json($node, $method, $path, $body, \%h);
}

# ---- the page is public, compiled in, with a strict policy
my ($st, $body, $hdr) = http($node, 'GET', '/');
is($st, 200, 'GET / without a token: 200');
like($hdr->{'content-type'}, qr{^text/html}, 'as HTML');
like($hdr->{'content-security-policy'}, qr/default-src 'self'/, "CSP default-src 'self'");
unlike($hdr->{'content-security-policy'}, qr/unsafe-inline|unsafe-eval|https?:/, 'no inline, no eval, no other origin');
is($hdr->{'cache-control'}, 'no-cache', 'revalidated');
is($hdr->{'x-content-type-options'}, 'nosniff', 'nosniff');
unlike($body, qr{https?://|<script>|\son\w+=}i, 'no absolute URL, no inline script or handler in the page');
($st, $body, $hdr) = http($node, 'GET', '/dashboard/app.js');
is($st, 200, 'app.js');
like($hdr->{'content-type'}, qr{^text/javascript}, 'as JavaScript');
unlike($body, qr{https?://(?!www\.w3\.org/2000/svg)}, 'the script names no other origin');
($st, $body, $hdr) = http($node, 'GET', '/dashboard/app.css');
like($hdr->{'content-type'}, qr{^text/css}, 'app.css as CSS');
($st) = http($node, 'GET', '/dashboard');
is($st, 200, '/dashboard is the page too');
($st) = http($node, 'GET', '/dashboard/secret.txt');
is($st, 404, 'an unknown file: 404');
($st) = http($node, 'GET', '/api/v1/dashboard/workers');
is($st, 401, 'its data needs a token');
($st) = http($node, 'GET', '/api/v1/dashboard/workers', undef, { authorization => "Bearer $tok{'read-only'}" });
is($st, 200, 'read-only reads it');

# ---- seed: orders (eu, us) with two dead letters, a group, a stream query
($st) = call('POST', '/api/v1/configure', { queue => 'orders', namespace => 'shop', options => { retryLimit => 0 } });
is($st, 200, 'configure orders');
# in four rounds, a sample interval apart, so the chart has a history
my $nsamples = "SELECT jsonb_array_length(queen_streams.dashboard_throughput()->'samples')";
for my $round (0 .. 3)
{
	my $seen = $node->safe_psql('postgres', $nsamples);
	for my $p (qw(eu us))
	{
		($st) = call('POST', '/api/v1/push', { items => [ map { { queue => 'orders', partition => $p,
			transactionId => "$p-$_", payload => { n => $_, region => $p } } } $round * 5 + 1 .. $round * 5 + 5 ] });
		is($st, 201, "push 5 to $p (round $round)");
	}
	my $until = time + 30;
	usleep(100_000) while time < $until && $node->safe_psql('postgres', $nsamples) == $seen;
}
my ($doc);
($st, $doc) = call('GET', '/api/v1/pop/queue/orders/partition/eu?batch=5&consumerGroup=billing');
my $eu = $doc->{messages}[0]{partitionId};
($st, $doc) = call('POST', '/api/v1/ack', { transactionId => 'eu-1', partitionId => $eu, leaseId => $doc->{leaseId},
	status => 'failed', consumerGroup => 'billing', error => 'card declined' });
ok($doc->[0]{dlq}, 'eu-1 dead-lettered');
($st, $doc) = call('GET', '/api/v1/pop/queue/orders/partition/eu?batch=1&consumerGroup=billing');
is($doc->{messages}[0]{transactionId}, 'eu-2', 'eu-2 popped');
($st, $doc) = call('POST', '/api/v1/ack', { transactionId => 'eu-2', partitionId => $eu, leaseId => $doc->{leaseId},
	status => 'dlq', consumerGroup => 'billing', error => 'malformed address' });
ok($doc->[0]{dlq}, 'eu-2 dead-lettered');
($st) = call('GET', '/api/v1/pop/queue/orders/partition/us?batch=3&consumerGroup=billing&autoAck=true');
is($st, 200, 'billing read 3 of us');
($st, $doc) = call('POST', '/streams/v1/queries', { name => 'orders.count', source_queue => 'orders',
	sink_queue => 'orders.counts', config_hash => 'h1' });
my $qid = $doc->{query_id};
($st, $doc) = call('GET', '/api/v1/pop/queue/orders/partition/eu?batch=4&consumerGroup=streams.orders.count');
($st, $doc) = call('POST', '/streams/v1/cycle', { query_id => $qid, partition_id => $eu,
	consumer_group => 'streams.orders.count',
	state_ops => [ map { { type => 'upsert', key => "k$_", value => { n => $_ } } } 1 .. 3 ],
	push_items => [ { queue => 'orders.counts', payload => { count => 4 } } ],
	ack => { leaseId => $doc->{leaseId}, status => 'completed', count => 4 } });
ok($doc->{success}, 'a stream cycle committed');
($st) = call('POST', '/api/v1/push', { items => [ map { { queue => 'b.only', payload => $_ } } 1 .. 3 ] }, $TB);
is($st, 201, "tenant B's queue");

# The chart reads the samples: wait until they caught up with the counters.
my $sums = "SELECT json_build_array(COALESCE(sum((s->>'pushed')::int), 0), COALESCE(sum((s->>'popped')::int), 0),"
  . " COALESCE(sum((s->>'acked')::int), 0))::text"
  . " FROM jsonb_array_elements(queen_streams.dashboard_throughput()->'samples') s";
my $counters = "SELECT json_build_array(sum(pushed), sum(popped), sum(acked))::text FROM queen_streams.metrics"
  . " WHERE tenant_id = '00000000-0000-0000-0000-000000000001'";
my $want = $node->safe_psql('postgres', $counters);
my $deadline = time + 60;
usleep(200_000) while time < $deadline && $node->safe_psql('postgres', $sums) ne $want;
is($node->safe_psql('postgres', $sums), $want, "the samples hold every counted message ($want)");
my ($pushed, $popped, $acked) = @{ $json->decode($want) };
is($pushed, 41, '41 pushed (40 and the sink message)');

# ---- what SQL says
my $ov = json_sql($node, 'queen.overview()');
my $ql = json_sql($node, 'queen.queues_list()');
my $sq = json_sql($node, "queen.status_queue('orders')");
my $groups = json_sql($node, 'queen.consumer_groups()');
my %group = map { $_->{name} => json_sql($node, "queen.consumer_group('$_->{name}')") } @$groups;
my $dlq = json_sql($node, 'queen.dlq()');
my $streams = json_sql($node, 'queen_streams.dashboard_streams()');
my $nworkers = $node->safe_psql('postgres', 'SELECT count(*) FROM queen_streams.http_workers()');
my $eu_last = $node->safe_psql('postgres', "SELECT last_offset FROM queen.log_partitions WHERE id = '$eu'");

# ---- the browser
my $out = "$PostgreSQL::Test::Utils::tmp_check/dashboard";
rmtree($out);
mkdir $out or die "mkdir $out: $!";
$ENV{QS_URL} = "http://127.0.0.1:$port";
$ENV{QS_OUT} = $out;
$ENV{QS_TOKEN_READ} = $tok{'read-only'};
$ENV{QS_TOKEN_ADMIN} = $tok{admin};
$ENV{QS_TENANT_B} = $TB;
$ENV{QS_REQUEUE_TXN} = 'eu-1';
$ENV{QS_DELETE_TXN} = 'eu-2';
my $driver = "$FindBin::Bin/../browser/dashboard.js";
my $rc = system('node', $driver);
is($rc, 0, 'headless Chromium ran the dashboard (node test/browser/dashboard.js)');
my $report = eval { $json->decode(slurp_file("$out/report.json")) } // {};
diag($report->{failure}) if $report->{failure};
my $v = $report->{views} // {};
my $act = $report->{actions} // {};

sub n { my $s = shift; return undef unless defined $s; $s =~ s/,//g; return $s eq '–' ? undef : $s; }

# ---- sign-in
ok($report->{loginShown}, 'a data call answered 401: the login box is shown');
like($report->{loginReason} // '', qr/bearer token/, 'with the reason');
my @stops = @{ $report->{tabStops} // [] };
is_deeply([ map { $_->{text} } @stops[0 .. 4] ], [ 'Overview', 'Consumer groups', 'Dead letters', 'Streams', 'Maintenance' ],
	'Tab walks the views as links');
is(scalar(grep { $_->{outline} ne 'solid' } @stops), 0, 'every focused element shows its focus');

# ---- overview
my $t = $v->{overview}{tiles};
is(n($t->{queues}), $ov->{queues}, 'overview: queues');
is(n($t->{partitions}), $ov->{partitions}, 'overview: partitions');
my $backlog = 0;
$backlog += $_->{messages}{pending} for @{ $ql->{queues} };
is(n($t->{backlog}), $backlog, "overview: backlog ($backlog)");
is(n($t->{processing}), $ov->{messages}{processing}, 'overview: leased');
is(n($t->{dlq}), $dlq->{total}, 'overview: dead letters (2)');
is(n($t->{workers}), $nworkers, 'overview: HTTP workers');
like($t->{connections} // '', qr/^[1-9]\d*$/, 'overview: open connections (the browser holds some)');
like($t->{'in-per-second'} // '', qr/^\d+\.\d\d$/, 'overview: messages in per second');
like($t->{'out-per-second'} // '', qr/^\d+\.\d\d$/, 'overview: messages out per second');
is_deeply([ map { n($t->{"chart-$_"}) } qw(pushed popped acked) ], [ $pushed, $popped, $acked ],
	'overview chart: the sampled pushed, popped and acked counts');
is_deeply({ map { $_->{queue} => [ n($_->{partitions}), n($_->{total}), n($_->{pending}), n($_->{processing}) ] }
	@{ $v->{overview}{queues} } },
	{ map { $_->{name} => [ $_->{partitions}, $_->{messages}{total}, $_->{messages}{pending}, $_->{messages}{processing} ] }
	@{ $ql->{queues} } }, 'overview: each queue as queues_list counts it');

# ---- a queue
$t = $v->{queue}{tiles};
is_deeply([ map { n($t->{$_}) } qw(total pending processing completed dead) ],
	[ map { $sq->{totals}{$_} } qw(total pending processing completed deadLetter) ], 'queue: totals');
is_deeply({ map { $_->{partition} => [ n($_->{total}), n($_->{backlog}), n($_->{dead}) ] } @{ $v->{queue}{partitions} } },
	{ map { $_->{name} => [ $_->{messages}{total}, $_->{messages}{pending}, $_->{messages}{deadLetter} ] }
	@{ $sq->{partitions} } }, 'queue: backlog per partition');
my %lag;
for my $g (keys %group)
{
	$lag{"$g/$_->{partition}"} = $_->{offsetLag} for @{ $group{$g}{orders}{partitions} // [] };
}
is_deeply({ map { ("$_->{group}/$_->{partition}" => n($_->{lag})) } @{ $v->{queue}{groups} } }, \%lag,
	'queue: lag of each group on each partition');
ok(n($t->{'chart-pushed'}) == 40, 'queue chart: 40 pushed to orders');

# ---- consumer groups
is_deeply({ map { $_->{group} => [ n($_->{lag}), n($_->{lagging}), n($_->{members}) ] } @{ $v->{groups}{groups} } },
	{ map { $_->{name} => [ $_->{totalLag}, $_->{partitionsWithLag}, $_->{members} ] } @$groups },
	'groups: total lag, lagging partitions, members');
is_deeply({ map { $_->{partition} => n($_->{lag}) } @{ $v->{group}{partitions} } },
	{ map { $_->{partition} => $_->{offsetLag} } @{ $group{billing}{orders}{partitions} } }, 'group billing: lag per partition');

# ---- dead letters
is(n($v->{dlq}{tiles}{'dlq-total'}), 2, 'dlq: total');
is_deeply([ sort map { $_->{transaction} } @{ $v->{dlq}{messages} } ],
	[ sort map { $_->{transactionId} } @{ $dlq->{messages} } ], 'dlq: the dead letters SQL lists');

# ---- streams
my ($sv) = @{ $v->{streams}{queries} // [] };
my ($ss) = @{ $streams->{queries} };
is($sv->{name}, 'orders.count', 'streams: the query');
is_deeply([ n($sv->{'state-rows'}), n($sv->{'total-lag'}) ], [ 3, $ss->{totalLag} ], 'streams: state rows and lag');
is_deeply({ map { $_->{partition} => [ n($_->{cursor}), n($_->{lag}), n($_->{'state-rows'}) ] } @{ $sv->{partitions} } },
	{ map { $_->{partition} => [ $_->{cursor}, $_->{lag}, $_->{stateRows} ] } @{ $ss->{partitions} } },
	'streams: cursor, lag and state rows per partition');

# ---- read-only sees, may not act
like($act->{maintenanceReadOnly} // '', qr/role does not allow/, 'read-only: maintenance is refused (admin)');
like($act->{requeueReadOnly} // '', qr/role does not allow/, 'read-only: requeue is refused');

# ---- admin acts; SQL sees it
like($act->{requeue}{flash} // '', qr/eu-1 requeued/, 'requeue: confirmed on the page');
is(n($act->{requeue}{tiles}{'dlq-total'}), 1, 'requeue: one dead letter left on the page');
is($node->safe_psql('postgres', "SELECT count(*) FROM queen.log_dlq WHERE transaction_id = 'eu-1'"), 0,
	'requeue: eu-1 left the DLQ');
is($node->safe_psql('postgres', "SELECT last_offset FROM queen.log_partitions WHERE id = '$eu'"), $eu_last + 1,
	'requeue: eu-1 pushed again onto eu');
like($act->{deleteQuestion} // '', qr/Delete the dead letter eu-2/, 'delete asks first');
is(n($act->{delete}{tiles}{'dlq-total'}), 0, 'delete: the page shows an empty DLQ');
is($node->safe_psql('postgres', 'SELECT count(*) FROM queen.log_dlq'), 0, 'delete: SQL too');
like($act->{seekQuestion} // '', qr/Seek billing on orders to the end/, 'seek asks first');
is_deeply([ map { n($_->{lag}) } @{ $act->{seek}{partitions} } ], [ 0, 0 ], 'seek: no lag left on the page');
is($node->safe_psql('postgres', "SELECT bool_and(c.committed = p.last_offset) FROM queen.log_consumers c"
	. " JOIN queen.log_partitions p ON p.id = c.partition_id JOIN queen.queues q ON q.id = p.queue_id"
	. " WHERE q.name = 'orders' AND c.consumer_group = 'billing'"), 't', 'seek: every billing cursor at the end in SQL');
is_deeply([ $act->{maintenanceBefore}{pop}, $act->{maintenanceOn}{pop}, $act->{maintenanceOff}{pop} ], [qw(off on off)],
	'pop maintenance toggled on and off');
is($node->safe_psql('postgres', "SELECT queen.maintenance('pop')->>'popMaintenanceMode'"), 'false', 'and left off');

# ---- tenancy: tenant B sees only its own
is_deeply([ map { $_->{queue} } @{ $v->{tenantB}{queues} // [] } ], ['b.only'], "tenant B's overview lists only its queue");
is(n($v->{tenantB}{tiles}{dlq}), 0, 'and none of the default tenant\'s dead letters');
like($v->{tenantBStreams} // '', qr/No stream query/, 'nor its stream queries');

# ---- the page stayed inside the listener and broke no rule
my @req = @{ $report->{requests} // [] };
ok(@req > 20, scalar(@req) . ' requests recorded');
is_deeply([ grep { !m{^http://127\.0\.0\.1:$port/} } @req ], [], 'every request went to the listener');
is_deeply([ grep { !/status of 40[13]/ } @{ $report->{consoleErrors} // [] } ], [],
	'no console error but the expected 401s and 403s (a CSP violation would be one)');
my @shots = @{ $report->{screenshots} // [] };
is(scalar(@shots), 8, 'a screenshot per view and of the login');
is(scalar(grep { -s $_ > 10_000 } @shots), 8, 'each a real picture');

done_testing();
