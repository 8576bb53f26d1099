# examples/prometheus (issue 40): the rules pass `promtool check rules` and
# their unit tests (`promtool test rules`); every metric the rules and the
# Grafana dashboard name is one /metrics serves; and a real Prometheus
# (Debian's, on loopback, a temporary data dir, scraping every second)
# records gauges equal to what SQL says after a scripted workload.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use File::Copy;
use HTTP::Tiny;
use JSON::PP;
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

# the Prometheus server this test started: stopped even when the test dies
my $prom_pid;
END
{
	if ($prom_pid)
	{
		kill 'TERM', $prom_pid;
		waitpid($prom_pid, 0);
	}
}

# a program on PATH, or undef
sub which
{
	my ($prog) = @_;
	my ($found) = grep { -x "$_/$prog" } split /:/, $ENV{PATH};
	return defined $found ? "$found/$prog" : undef;
}

my $promtool = which('promtool');
plan skip_all => 'promtool is missing (scripts/install-deps.sh --test installs prometheus)' unless $promtool;
my $ex = "$FindBin::Bin/../../examples/prometheus";

# ---- the rules, by Prometheus' own tools
my $out = `cd $ex && promtool check rules rules.yml 2>&1`;
is($?, 0, 'promtool check rules rules.yml') or diag($out);
like($out, qr/SUCCESS: \d+ rules found/, 'the rules parse');
$out = `cd $ex && promtool test rules rules_test.yml 2>&1`;
is($?, 0, 'promtool test rules rules_test.yml: every alert fires when, and only when, it should') or diag($out);
$out = `cd $ex && promtool check config prometheus.yml 2>&1`;
is($?, 0, 'promtool check config prometheus.yml') or diag($out);

# ---- a live instance with every family the examples name
my $node = qs_node('prom', <<'EOF');
queen_streams.stream_workers = 1
queen_streams.stream_poll_interval = 200
EOF
my $lit = sub { (my $s = JSON::PP->new->canonical->encode($_[0])) =~ s/'/''/g; "'$s'" };
$node->safe_psql('postgres', "SELECT queen_streams.create_stream('s1', "
	  . $lit->({ source => 'src', sink => 'snk', key => '$.k', window => { type => 'tumbling', size => 60 },
		time => { type => 'processing' }, aggregates => { n => { fn => 'count' } } }) . ")");

sub push_items
{
	my ($queue, $part, $n) = @_;
	my ($st) = http_json($node, 'POST', '/api/v1/push',
		{ items => [ map { { queue => $queue, partition => $part, payload => { k => $_ } } } 1 .. $n ] });
	die "push: $st" unless $st == 201;
}
push_items('src', 'a', 1);
my ($st, $metrics) = http($node, 'GET', '/metrics');
my %family = map { $_ => 1 } $metrics =~ /^# TYPE (\w+) /mg;
for my $file ('rules.yml', 'grafana-dashboard.json')
{
	open(my $fh, '<', "$ex/$file") or die "$file: $!";
	my $text = do { local $/; <$fh> };
	my %named = map { $_ => 1 } $text =~ /(?<![:\w])(queen_streams_\w+)/g;
	ok(%named >= 5, "$file names " . scalar(keys %named) . ' metrics');
	my @unknown = grep { !$family{$_} } sort keys %named;
	is("@unknown", '', "every metric $file names is served by /metrics");
}

# ---- Prometheus on loopback, scraping every second
my $prometheus = which('prometheus');
SKIP:
{
	skip 'the prometheus server is missing', 1 unless $prometheus;
	my $dir = PostgreSQL::Test::Utils::tempdir();
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	copy("$ex/rules.yml", "$dir/rules.yml") or die "copy: $!";
	open(my $fh, '>', "$dir/prometheus.yml") or die;
	print $fh <<"EOF";
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rules.yml]
scrape_configs:
  - job_name: queen_streams
    static_configs:
      - targets: ['127.0.0.1:$node->{qs_http_port}']
EOF
	close $fh;
	my $pid = fork() // die "fork: $!";
	$prom_pid = $pid if $pid;
	if ($pid == 0)
	{
		open(STDOUT, '>', "$dir/prometheus.log");
		open(STDERR, '>&', \*STDOUT);
		exec($prometheus, "--config.file=$dir/prometheus.yml", "--storage.tsdb.path=$dir/data",
			"--web.listen-address=127.0.0.1:$port", '--log.level=warn');
		POSIX::_exit(127);    # no END blocks of the test's in the child
	}
	my $ua = HTTP::Tiny->new(timeout => 10);
	my $api = "http://127.0.0.1:$port";
	my $deadline = time + 60;
	usleep(200_000) until $ua->get("$api/-/ready")->{success} || time > $deadline;
	ok($ua->get("$api/-/ready")->{success}, 'Prometheus is ready') or diag(slurp_file("$dir/prometheus.log"));

	my $query = sub {
		my ($q) = @_;
		my $r = $ua->get("$api/api/v1/query?query=" . join('', map { sprintf '%%%02X', ord } split //, $q));
		return [] unless $r->{success};
		return decode_json($r->{content})->{data}{result};
	};
	# a scrape before the workload, so that what changes is seen changing
	$deadline = time + 60;
	usleep(200_000) until @{ $query->('queen_streams_consumer_group_backlog_messages') } || time > $deadline;
	ok(@{ $query->('queen_streams_consumer_group_backlog_messages') }, 'Prometheus scraped the instance');

	# the scripted workload: pushes, a queue-mode ack, a dead letter, a group's lease, a stream's lag
	push_items('orders', "p$_", 3) for 1 .. 4;
	my ($s2, $pop) = http_json($node, 'GET', '/api/v1/pop/queue/orders/partition/p1?batch=2');
	my ($m1, $m2) = @{ $pop->{messages} };
	($s2) = http_json($node, 'POST', '/api/v1/ack/batch', { acknowledgments => [
		{ transactionId => $m1->{transactionId}, partitionId => $m1->{partitionId}, leaseId => $m1->{leaseId} },
		{ transactionId => $m2->{transactionId}, partitionId => $m2->{partitionId}, leaseId => $m2->{leaseId}, status => 'dlq' } ] });
	die "ack: $s2" unless $s2 == 200;
	http_json($node, 'GET', '/api/v1/pop/queue/orders/partition/p2?batch=1&consumerGroup=audit');
	$node->poll_query_until('postgres', "SELECT bool_and(lag = 0) FROM queen_streams.stream_status('s1')");
	$node->safe_psql('postgres', "SELECT queen_streams.pause_stream('s1')");
	push_items('src', 'a', 5);

	# what SQL says now: "queue/group" => [backlog, dead letters, leased]
	my %want;
	for (split /\n/, $node->safe_psql('postgres',
		'SELECT queue, consumer_group, backlog_messages, dead_letters, leased_partitions FROM queen_streams.queue_stats'))
	{
		my ($q, $g, @v) = split /\|/;
		$want{"$q/$g"} = \@v;
	}
	my $stream_lag = $node->safe_psql('postgres', "SELECT sum(lag) FROM queen_streams.stream_status('s1')");
	is($stream_lag, 5, 'SQL: the paused stream lags by five');

	# Prometheus' latest samples, once a scrape after the workload has landed
	my (%got, $slag);
	$deadline = time + 60;
	while (time < $deadline)
	{
		%got = ();
		for my $m (qw(backlog_messages dead_letters leased_partitions))
		{
			$got{"$_->{metric}{queue}/$_->{metric}{consumer_group}"}{$m} = $_->{value}[1]
			  for @{ $query->("queen_streams_consumer_group_$m") };
		}
		($slag) = map { $_->{value}[1] } @{ $query->('queen_streams_declared_stream_lag_messages{stream="s1"}') };
		last if ($slag // -1) == 5 && ($got{'orders/__QUEUE_MODE__'}{dead_letters} // 0) == 1
		  && exists $got{'orders/audit'};
		usleep(250_000);
	}
	is_deeply({ map { $_ => [ @{ $got{$_} }{qw(backlog_messages dead_letters leased_partitions)} ] } keys %got },
		\%want, 'the gauges Prometheus recorded equal queen_streams.queue_stats: '
		  . join(', ', map { "$_ @{ $want{$_} }" } sort keys %want));
	is($slag, 5, "the stream's lag as recorded");
	my ($up) = map { $_->{value}[1] } @{ $query->('up{job="queen_streams"}') };
	is($up, 1, 'the target is up');
	# the rules are evaluated every second, after the scrapes: wait for them too
	my ($sum, $alerts);
	my $total = $want{'orders/__QUEUE_MODE__'}[0] + $want{'orders/audit'}[0];
	$deadline = time + 60;
	while (time < $deadline)
	{
		($sum) = map { $_->{value}[1] }
		  @{ $query->('tenant_queue:queen_streams_consumer_group_backlog_messages:sum{queue="orders"}') };
		$alerts = decode_json($ua->get("$api/api/v1/alerts")->{content})->{data}{alerts};
		last if ($sum // -1) == $total && grep { $_->{labels}{alertname} eq 'QueenStreamsDeadLetters' } @$alerts;
		usleep(250_000);
	}
	is($sum, $total, 'the recording rule sums the groups');
	ok((grep { $_->{labels}{alertname} eq 'QueenStreamsDeadLetters' && $_->{labels}{queue} eq 'orders' } @$alerts),
		'the dead letter raised its alert') or diag(explain($alerts));

	kill 'TERM', $pid;
	waitpid($pid, 0);
	$prom_pid = undef;
}

done_testing();
