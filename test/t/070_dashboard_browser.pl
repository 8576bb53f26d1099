# The dashboard (GET /) in a real browser: Debian's headless Chromium,
# driven by test/browser/dashboard.js (playwright-core, no browser download),
# against a node seeded over HTTP with auth = jwt and tenancy = header. Every
# view is loaded; the numbers it shows must equal what SQL says; a read-only
# token sees but may not act; an admin requeues and deletes dead letters
# (from the dead-letter list and from the message browser), pauses a
# declared stream, seeks a group to the end and toggles pop maintenance, and
# SQL sees each effect; backlog and lag are queue_stats' (and /metrics');
# the message browser filters by partition and time and shows a message
# with its trace; the page makes no request outside the listener and breaks
# no CSP rule; another tenant sees only its own. Then, with auth = off and a
# 390 px wide screen: no sign-in box, no view wider than the screen, and the
# stream resumed. Screenshots are kept under
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
use Time::HiRes qw(time usleep);

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

# ---- the throughput samples end now: the interval still open counts what
# was just pushed, without waiting a sample interval (tenant B's queue)
my $tp = sub {
	my ($s, $d) = dash_call($node, 'GET', '/api/v1/dashboard/throughput', undef, $TB);
	return $d->{samples} // [];
};
my $until = time + 30;
usleep(100_000) while time < $until && !@{ $tp->() };
($st) = dash_call($node, 'POST', '/api/v1/push', { items => [ map { { queue => 'b.only', payload => $_ } } 1 .. 3 ] }, $TB);
my $samples = $tp->();
my $open = 0;
$open += $_->{pushed} for @$samples;
is($open, 3, 'throughput: the 3 messages just pushed, before the next sample');
ok($samples->[-1]{partial}, 'in the last interval, the one still open');

# ---- seed: orders (eu, us) with three dead letters, a group, a stream query
# (test/t/QsDashboard.pm), the samples caught up with the counters
my $seed = dash_seed($node);
my ($eu, $pushed, $popped, $acked) = @$seed{qw(eu pushed popped acked)};
($st) = dash_call($node, 'POST', '/streams/v1/streams/nope/pause');
is($st, 404, 'pausing an unknown stream: 404');
($st) = http($node, 'POST', '/streams/v1/streams/clicks.per_hour/pause', '{}',
	{ authorization => "Bearer $tok{'read-only'}" });
is($st, 403, 'pausing needs read-write');

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
$ENV{QS_REQUEUE_MSG} = 'eu-3';
$ENV{QS_EU} = $eu;
$ENV{QS_STREAM} = 'clicks.per_hour';
# the message browser's time filter: from the second us-11 was pushed in (round 2)
my $from = $node->safe_psql('postgres', "SELECT to_char(date_trunc('second', (m->>'createdAt')::timestamptz)"
	. " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM jsonb_array_elements("
	. "queen.messages('orders', 'us', NULL, NULL, NULL, NULL, NULL, 100, 0)->'messages') m WHERE m->>'transactionId' = 'us-11'");
$ENV{QS_MSG_FROM} = $from;
# what the message browser must list (before the browser requeues anything)
my $msgs = sub { [ map { $_->{transactionId} } @{ json_sql($node, "queen.messages(@_)")->{messages} } ] };
my %msg_truth = (all => $msgs->("NULL, NULL, NULL, NULL, NULL, NULL, NULL, 50, 0"),
	us => $msgs->("'orders', 'us', NULL, NULL, NULL, NULL, NULL, 50, 0"),
	from => $msgs->("'orders', 'us', NULL, NULL, NULL, '$from', NULL, 50, 0"));
my $driver = "$FindBin::Bin/../browser/dashboard.js";
my $t_before = time;
my $rc = system('node', $driver);
my $t_run = time - $t_before;
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
is_deeply([ map { $_->{text} } @stops[0 .. 5] ], [ 'Overview', 'Consumer groups', 'Messages', 'Dead letters', 'Streams', 'Maintenance' ],
	'Tab walks the views as links');
is(scalar(grep { $_->{outline} ne 'solid' } @stops), 0, 'every focused element shows its focus');

# ---- overview: backlog and lag are queen_streams.queue_stats' (the /metrics gauges)
my $qst = $truth->{qstats};
my %qsum;
for my $r (@$qst)
{
	$qsum{ $r->{queue} }{backlog} += $r->{backlog};
}
sub lag_ok
{
	my ($page, $sql, $what) = @_;
	# the page read it during the browser run: no younger than SQL before it, no older than after it
	$sql //= 0;
	ok(defined $page && $page >= $sql - 1 && $page <= $sql + $t_run + 1, "$what (page $page, SQL $sql before a ${t_run}s run)");
}
my $t = $v->{overview}{tiles};
diag("overview: $t->{error}") if $t->{error};
is(n($t->{queues}), $ov->{queues}, 'overview: queues');
is(n($t->{partitions}), $ov->{partitions}, 'overview: partitions');
is(n($t->{backlog}), $truth->{backlog}, "overview: backlog, the sum of queue_stats.backlog_messages ($truth->{backlog})");
my $qm_pending = 0;
$qm_pending += $_->{messages}{pending} for @{ $ql->{queues} };
isnt($truth->{backlog}, $qm_pending, "(which is not queue mode's pending, $qm_pending, that the page showed before)");
is(n($t->{processing}), $ov->{messages}{processing}, 'overview: leased');
is(n($t->{dlq}), $dlq->{total}, 'overview: dead letters (3)');
is(n($t->{workers}), $nworkers, 'overview: HTTP workers');
like($t->{connections} // '', qr/^[1-9]\d*$/, 'overview: open connections (the browser holds some)');
like($t->{'in-per-second'} // '', qr/^\d+\.\d\d$/, 'overview: messages in per second');
like($t->{'out-per-second'} // '', qr/^\d+\.\d\d$/, 'overview: messages out per second');
is_deeply([ map { n($t->{"chart-$_"}) } qw(pushed popped acked) ], [ $pushed, $popped, $acked ],
	'overview chart: the sampled pushed, popped and acked counts, the open interval included');
is_deeply({ map { $_->{queue} => [ n($_->{partitions}), n($_->{total}), n($_->{processing}), n($_->{backlog}) ] }
	@{ $v->{overview}{queues} } },
	{ map { $_->{name} => [ $_->{partitions}, $_->{messages}{total}, $_->{messages}{processing}, $qsum{ $_->{name} }{backlog} // 0 ] }
	@{ $ql->{queues} } }, 'overview: each queue as queues_list counts it, its backlog as queue_stats');

# ---- a queue
$t = $v->{queue}{tiles};
is_deeply([ map { n($t->{$_}) } qw(total processing dead backlog) ],
	[ (map { $sq->{totals}{$_} } qw(total processing deadLetter)), $qsum{orders}{backlog} ], 'queue: totals, backlog of all groups');
is_deeply({ map { $_->{backlogGroup} => [ n($_->{backlog}), n($_->{'backlog-partitions'}), n($_->{leased}), n($_->{dead}) ] }
	@{ $v->{queue}{backlogGroups} } },
	{ map { $_->{group} => [ $_->{backlog}, $_->{parts}, $_->{leased}, $_->{dead} ] } grep { $_->{queue} eq 'orders' } @$qst },
	'queue: backlog, partitions with backlog, leases, dead letters of each group (no queue-mode row: nobody pops without a group)');
is_deeply({ map { $_->{partition} => [ n($_->{total}), n($_->{dead}) ] } @{ $v->{queue}{partitions} } },
	{ map { $_->{name} => [ $_->{messages}{total}, $_->{messages}{deadLetter} ] }
	@{ $sq->{partitions} } }, 'queue: messages and dead letters per partition');
my %lag;
for my $g (keys %group)
{
	$lag{"$g/$_->{partition}"} = $_->{offsetLag} for @{ $group{$g}{orders}{partitions} // [] };
}
is_deeply({ map { ("$_->{group}/$_->{partition}" => n($_->{lag})) } @{ $v->{queue}{groups} } }, \%lag,
	'queue: lag of each group on each partition');
ok(n($t->{'chart-pushed'}) == 40, 'queue chart: 40 pushed to orders');

# ---- consumer groups
my %state = map { ("$_->{name}/$_->{queueName}" => $_->{state}) } @$groups;
is_deeply({ map { ("$_->{group}/$_->{queue}" => [ n($_->{backlog}), n($_->{'backlog-partitions'}), n($_->{leased}), n($_->{dead}), $_->{state} ]) }
	@{ $v->{groups}{groups} } },
	{ map { ("$_->{group}/$_->{queue}" => [ $_->{backlog}, $_->{parts}, $_->{leased}, $_->{dead},
		$state{"$_->{group}/$_->{queue}"} // '–' ]) } @$qst },
	'groups: every (group, queue) of queue_stats with its backlog, partitions with backlog, leases, dead letters, state');
for my $r (@$qst)
{
	my ($row) = grep { $_->{group} eq $r->{group} && $_->{queue} eq $r->{queue} } @{ $v->{groups}{groups} };
	lag_ok(n($row->{'lag-seconds'}), $r->{lag}, "groups: lag in seconds of $r->{group} on $r->{queue}");
}
like($v->{groups}{text} // '', qr/Dead\s*not lagging, and the group has acknowledged nothing yet/, 'groups: the states are explained');
like($v->{groups}{text} // '', qr/Backlog\s*messages a consumer group has not acknowledged/, 'groups: backlog is defined');
is_deeply({ map { $_->{partition} => n($_->{lag}) } @{ $v->{group}{partitions} } },
	{ map { $_->{partition} => $_->{offsetLag} } @{ $group{billing}{orders}{partitions} } }, 'group billing: lag per partition');

# ---- dead letters
is(n($v->{dlq}{tiles}{'dlq-total'}), 3, 'dlq: total');
is_deeply([ sort map { $_->{transaction} } @{ $v->{dlq}{messages} } ],
	[ sort map { $_->{transactionId} } @{ $dlq->{messages} } ], 'dlq: the dead letters SQL lists');

# ---- streams: registered queries, and declared streams as stream_stats counts them
my ($sv) = grep { $_->{name} eq 'orders.count' } @{ $v->{streams}{queries} // [] };
my ($ss) = grep { $_->{name} eq 'orders.count' } @{ $streams->{queries} };
ok($sv, 'streams: the query orders.count');
is_deeply([ n($sv->{'state-rows'}), n($sv->{'total-lag'}) ], [ 3, $ss->{totalLag} ], 'streams: state rows and lag');
is_deeply({ map { $_->{partition} => [ n($_->{cursor}), n($_->{lag}), n($_->{'state-rows'}) ] } @{ $sv->{partitions} } },
	{ map { $_->{partition} => [ $_->{cursor}, $_->{lag}, $_->{stateRows} ] } @{ $ss->{partitions} } },
	'streams: cursor, lag and state rows per partition');
my ($dv) = @{ $v->{streams}{declared} // [] };
my ($ds) = @{ $truth->{declared} // [] };
is($dv->{name}, 'clicks.per_hour', 'streams: the declared stream');
is_deeply([ map { n($dv->{$_}) } qw(lag open-windows late errors events) ],
	[ map { $ds->{$_} } qw(lag_messages open_windows late_events errors events) ],
	"streams: lag, open windows, late events, errors, events as stream_stats ($ds->{open_windows} open windows)");
like($dv->{rate} // '', qr/^\d+\.\d\d$/, 'streams: events per second');
is($dv->{paused}, 'running', 'streams: running');

# ---- the message browser
is_deeply([ map { $_->{transaction} } @{ $v->{messagesAll} // [] } ], $msg_truth{all},
	'messages: newest first, as queen.messages lists them');
is_deeply([ map { $_->{transaction} } @{ $v->{messagesUs} // [] } ], $msg_truth{us},
	'messages: filtered by queue orders and partition us');
like($v->{messagesFrom}{hash} // '', qr/from=/, 'messages: the time filter is in the address');
my @from = map { $_->{transaction} } @{ $v->{messagesFrom}{rows} // [] };
is_deeply(\@from, $msg_truth{from}, "messages: from $from, as SQL");
is_deeply([ sort @from ], [ sort map { "us-$_" } 11 .. 20 ], 'messages: rounds 2 and 3 only');
my $m = $v->{message} // {};
is_deeply([ @{ $m->{tiles} // {} }{qw(queue partition transaction)} ], [qw(orders us us-12)], 'message: us-12 shown');
my $tr = json_sql($node, "queen.traces('$seed->{us}', 'us-12')")->{traces};
is(n($m->{tiles}{'trace-count'}), scalar(@$tr), 'message: its trace events, as queen.traces counts them (1)');
is_deeply([ map { [ $_->{event}, $_->{data} ] } @{ $m->{traces} // [] } ], [ map { [ $_->{eventType}, '{"step":"shipped"}' ] } @$tr ],
	'message: the trace event and its data');

# ---- read-only sees, may not act
like($act->{maintenanceReadOnly} // '', qr/role does not allow/, 'read-only: maintenance is refused (admin)');
like($act->{requeueReadOnly} // '', qr/role does not allow/, 'read-only: requeue is refused');
like($act->{pauseReadOnly} // '', qr/role does not allow/, 'read-only: pausing a stream is refused');

# ---- admin acts; SQL sees it
like($act->{requeue}{flash} // '', qr/eu-1 requeued/, 'requeue: confirmed on the page');
is(n($act->{requeue}{tiles}{'dlq-total'}), 2, 'requeue: two dead letters left on the page');
is($node->safe_psql('postgres', "SELECT count(*) FROM queen.log_dlq WHERE transaction_id = 'eu-1'"), 0,
	'requeue: eu-1 left the DLQ');
like($act->{deleteQuestion} // '', qr/Delete the dead letter eu-2/, 'delete asks first');
is(n($act->{delete}{tiles}{'dlq-total'}), 1, 'delete: the page shows one dead letter left');
is($node->safe_psql('postgres', "SELECT count(*) FROM queen.log_dlq WHERE transaction_id = 'eu-2'"), 0, 'delete: SQL too');
like($act->{messageBefore}{error} // '', qr/out of stock/, 'message browser: eu-3 shown as a dead letter');
like($act->{requeueMessage}{flash} // '', qr/eu-3 requeued/, 'message browser: requeue confirmed on the page');
is($node->safe_psql('postgres', 'SELECT count(*) FROM queen.log_dlq'), 0, 'message browser: eu-3 left the DLQ, none left');
is($node->safe_psql('postgres', "SELECT last_offset FROM queen.log_partitions WHERE id = '$eu'"), $eu_last + 2,
	'requeue: eu-1 and eu-3 pushed again onto eu');
like($act->{pauseQuestion} // '', qr/Pause the stream clicks.per_hour/, 'pause asks first');
is(($act->{pause}{declared}[0] // {})->{paused}, 'paused', 'pause: the page shows it paused');
is($node->safe_psql('postgres', "SELECT paused FROM queen_streams.declared_streams WHERE name = 'clicks.per_hour'"), 't',
	'pause: paused in SQL');
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
is(scalar(@shots), 10, 'a screenshot per view and of the login');
is(scalar(grep { -s $_ > 10_000 } @shots), 10, 'each a real picture');

# ---- auth = off, a 390 px wide screen: no sign-in box, nothing wider than the screen
$node->safe_psql('postgres', "ALTER SYSTEM SET queen_streams.auth = off; SELECT pg_reload_conf()");
$until = time + 30;
usleep(100_000) while time < $until && (http($node, 'GET', '/api/v1/dashboard/workers'))[0] != 200;
is((http($node, 'GET', '/api/v1/dashboard/workers'))[0], 200, 'auth = off: data without a token');
$ENV{QS_PHASE} = 'phone';
$report = {};
$rc = system('node', $driver);
is($rc, 0, 'headless Chromium ran the dashboard at 390 px');
$report = eval { $json->decode(slurp_file("$out/report.json")) } // {};
diag($report->{failure}) if $report->{failure};
my $ph = $report->{phone} // {};
is($ph->{width}, 390, 'the window is 390 px wide');
ok(defined $ph->{signInButtonVisible} && !$ph->{signInButtonVisible}, 'auth = off: no sign-in button');
ok(defined $ph->{loginVisible} && !$ph->{loginVisible}, 'auth = off: no sign-in box');
my $backlog_now = $node->safe_psql('postgres', "SELECT sum(backlog_messages) FROM queen_streams.queue_stats"
	. " WHERE tenant_id = '00000000-0000-0000-0000-000000000001'");
is(n($ph->{overviewBacklog}), $backlog_now, "auth = off: the overview shows its numbers (backlog $backlog_now)");
is(scalar(keys %{ $ph->{overflow} // {} }), 9, 'nine views measured at 390 px');
is_deeply({ map { $_ => $ph->{overflow}{$_} } grep { $ph->{overflow}{$_} > 0 } keys %{ $ph->{overflow} // {} } }, {},
	'no view is wider than a 390 px screen (no horizontal overflow)');
like($ph->{resumeFlash} // '', qr/clicks.per_hour resumed/, 'resume confirmed on the page');
is($ph->{afterResume}, 'running', 'resume: the page shows it running');
is($node->safe_psql('postgres', "SELECT paused FROM queen_streams.declared_streams WHERE name = 'clicks.per_hour'"), 'f',
	'resume: running in SQL');
is_deeply($report->{consoleErrors} // [], [], 'no console error at 390 px');

done_testing();
