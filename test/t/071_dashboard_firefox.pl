# The dashboard (GET /) in Firefox: Debian's headless Firefox ESR, driven over
# WebDriver BiDi by test/browser/dashboard_firefox.js (puppeteer-core, no
# browser download, no geckodriver), against the node 070 seeds
# (test/t/QsDashboard.pm: auth = jwt, tenancy = header). A read-only token
# signs in through the page's login box; the overview, the queue orders, the
# consumer groups, the streams and the message browser must show what SQL
# says (queues, partitions, backlog and lag as queen_streams.queue_stats
# counts them, leased, dead letters, the chart's counts, each group's lag per
# partition, the declared stream's lag, open windows, late events, errors,
# a partition's messages, a message's trace); the page makes no request
# outside the listener, logs no console
# error and breaks no CSP rule. A screenshot of each view is kept under
# tmp_check/dashboard-firefox/screenshots (scripts/test.sh copies them to
# test/results/screenshots/firefox). If Firefox cannot start, this fails.
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
use Time::HiRes qw(time);

my $json = JSON::PP->new->canonical;

my $node = dash_node('dashboard_firefox');
my $port = $node->{qs_http_port};
my $seed = dash_seed($node);
my ($pushed, $popped, $acked) = @$seed{qw(pushed popped acked)};
my $truth = dash_truth($node, $seed->{eu});
my ($ov, $ql, $sq, $dlq) = @$truth{qw(ov ql sq dlq)};

# ---- the browser
my $out = "$PostgreSQL::Test::Utils::tmp_check/dashboard-firefox";
rmtree($out);
mkdir $out or die "mkdir $out: $!";
$ENV{QS_URL} = "http://127.0.0.1:$port";
$ENV{QS_OUT} = $out;
$ENV{QS_TOKEN_READ} = $DASH_TOKEN{'read-only'};
my $driver = "$FindBin::Bin/../browser/dashboard_firefox.js";
my $t0 = time;
my $rc = system('node', $driver);
is($rc, 0, 'headless Firefox ran the dashboard (node test/browser/dashboard_firefox.js)');
my $report = eval { $json->decode(slurp_file("$out/report.json")) } // {};
diag($report->{failure}) if $report->{failure};
like($report->{browser} // '', qr{^firefox/\d+}, 'the browser is Firefox (' . ($report->{browser} // 'none') . ')');
like($report->{userAgent} // '', qr{Firefox/\d+}, 'and says so to the page');
note(sprintf('Firefox run: %.1f s', time - $t0));
my $v = $report->{views} // {};

sub n { my $s = shift; return undef unless defined $s; $s =~ s/,//g; return $s eq '–' ? undef : $s; }

ok($report->{loginShown}, 'a data call answered 401: the login box is shown, the token signs in');

# ---- overview
my $t = $v->{overview}{tiles} // {};
my $qst = $truth->{qstats};
my %qsum;
$qsum{ $_->{queue} } += $_->{backlog} for @$qst;
is(n($t->{queues}), $ov->{queues}, "overview: queues ($ov->{queues})");
is(n($t->{partitions}), $ov->{partitions}, 'overview: partitions');
is(n($t->{backlog}), $truth->{backlog}, "overview: backlog, as queue_stats sums it ($truth->{backlog})");
is(n($t->{processing}), $ov->{messages}{processing}, 'overview: leased');
is(n($t->{dlq}), $dlq->{total}, "overview: dead letters ($dlq->{total})");
is(n($t->{workers}), $truth->{nworkers}, 'overview: HTTP workers');
is_deeply([ map { n($t->{"chart-$_"}) } qw(pushed popped acked) ], [ $pushed, $popped, $acked ],
	'overview chart: the sampled pushed, popped and acked counts');
is_deeply({ map { $_->{queue} => [ n($_->{partitions}), n($_->{total}), n($_->{processing}), n($_->{backlog}) ] }
	@{ $v->{overview}{queues} // [] } },
	{ map { $_->{name} => [ $_->{partitions}, $_->{messages}{total}, $_->{messages}{processing}, $qsum{ $_->{name} } // 0 ] }
	@{ $ql->{queues} } }, 'overview: each queue as queues_list counts it, its backlog as queue_stats');

# ---- the queue orders
$t = $v->{queue}{tiles} // {};
is_deeply([ map { n($t->{$_}) } qw(total processing dead backlog) ],
	[ (map { $sq->{totals}{$_} } qw(total processing deadLetter)), $qsum{orders} ], 'queue: totals, backlog of all groups');
is_deeply({ map { $_->{backlogGroup} => [ n($_->{backlog}), n($_->{'backlog-partitions'}), n($_->{dead}) ] }
	@{ $v->{queue}{backlogGroups} // [] } },
	{ map { $_->{group} => [ $_->{backlog}, $_->{parts}, $_->{dead} ] } grep { $_->{queue} eq 'orders' } @$qst },
	'queue: backlog, partitions with backlog, dead letters of each group');
is_deeply({ map { $_->{partition} => [ n($_->{total}), n($_->{dead}) ] } @{ $v->{queue}{partitions} // [] } },
	{ map { $_->{name} => [ $_->{messages}{total}, $_->{messages}{deadLetter} ] }
	@{ $sq->{partitions} } }, 'queue: messages and dead letters per partition');
my %lag;
for my $g (keys %{ $truth->{group} })
{
	$lag{"$g/$_->{partition}"} = $_->{offsetLag} for @{ $truth->{group}{$g}{orders}{partitions} // [] };
}
is_deeply({ map { ("$_->{group}/$_->{partition}" => n($_->{lag})) } @{ $v->{queue}{groups} // [] } }, \%lag,
	'queue: lag of each group on each partition');
is(n($t->{'chart-pushed'}), 40, 'queue chart: 40 pushed to orders');

# ---- consumer groups, streams, messages
is_deeply({ map { ("$_->{group}/$_->{queue}" => [ n($_->{backlog}), n($_->{'backlog-partitions'}), n($_->{dead}) ]) }
	@{ $v->{groups}{groups} // [] } },
	{ map { ("$_->{group}/$_->{queue}" => [ $_->{backlog}, $_->{parts}, $_->{dead} ]) } @$qst },
	'groups: every (group, queue) of queue_stats with its backlog, partitions with backlog, dead letters');
my ($dv) = @{ $v->{streams} // [] };
my ($ds) = @{ $truth->{declared} // [] };
is_deeply([ $dv->{name}, map { n($dv->{$_}) } qw(lag open-windows late errors) ],
	[ 'clicks.per_hour', map { $ds->{$_} } qw(lag_messages open_windows late_events errors) ],
	'streams: the declared stream\'s lag, open windows, late events, errors as stream_stats');
is_deeply([ map { $_->{transaction} } @{ $v->{messagesUs} // [] } ],
	[ map { $_->{transactionId} } @{ json_sql($node, "queen.messages('orders', 'us', NULL, NULL, NULL, NULL, NULL, 50, 0)")->{messages} } ],
	'messages: partition us, newest first, as queen.messages lists them');
is_deeply([ @{ $v->{message}{tiles} // {} }{qw(transaction trace-count)}, map { $_->{event} } @{ $v->{message}{traces} // [] } ],
	[ 'us-12', 1, 'info' ], 'message: us-12 with its trace event');

# ---- the page stayed inside the listener and broke no rule
my @req = @{ $report->{requests} // [] };
ok(@req > 5, scalar(@req) . ' requests recorded');
# (Firefox reports the page's empty icon, <link rel="icon" href="data:,">, as a request; nothing leaves for it)
is_deeply([ grep { !m{^http://127\.0\.0\.1:$port/} && $_ ne 'data:,' } @req ], [],
	'every request went to the listener (but the inline empty icon)');
ok(scalar(grep { m{^http://127\.0\.0\.1:$port/api/v1/} } @req) >= 5, 'the data came from the listener\'s API');
is_deeply([ grep { !/status of 401/ } @{ $report->{consoleErrors} // [] } ], [],
	'no console error (but the expected 401 before signing in)');
is_deeply($report->{cspViolations}, [], 'no CSP violation');
my @shots = @{ $report->{screenshots} // [] };
is(scalar(@shots), 4, 'a screenshot of the overview, the queue, the messages and a message');
is(scalar(grep { -s $_ > 10_000 } @shots), 4, 'each a real picture');

done_testing();
