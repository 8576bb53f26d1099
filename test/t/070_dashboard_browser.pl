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
use QsDashboard;
use File::Path qw(rmtree);
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;

my $json = JSON::PP->new->canonical;
my %tok = %DASH_TOKEN;
my $TB = $DASH_TENANT_B;

my $node = dash_node('dashboard');
my $port = $node->{qs_http_port};

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
# (test/t/QsDashboard.pm), the samples caught up with the counters
my $seed = dash_seed($node);
my ($eu, $pushed, $popped, $acked) = @$seed{qw(eu pushed popped acked)};

# ---- what SQL says
my $truth = dash_truth($node, $eu);
my ($ov, $ql, $sq, $groups, $dlq, $streams, $nworkers, $eu_last) = @$truth{qw(ov ql sq groups dlq streams nworkers eu_last)};
my %group = %{ $truth->{group} };

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
