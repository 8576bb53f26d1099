# The seeded node of the dashboard's browser tests (070_dashboard_browser.pl,
# Chromium; 071_dashboard_firefox.pl, Firefox): auth = jwt with a read-only
# and an admin token, tenancy = header with the tokens' tenant taken from the
# header (jwt_trust_tenant_header), a sample every 2 s; the queue orders
# (partitions eu and us) with three dead letters and a trace, the consumer
# group billing, a stream query and its state, a declared stream over the
# queue clicks, tenant B's own queue; then what SQL says, for
# the tests to compare with what the page shows.
package QsDashboard;

use strict;
use warnings;

use Exporter 'import';
use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use Digest::SHA qw(hmac_sha256);
use JSON::PP;
use MIME::Base64 qw(encode_base64);
use Test::More;
use Time::HiRes qw(time usleep);

our @EXPORT = qw(dash_node dash_call dash_seed dash_truth %DASH_TOKEN $DASH_TENANT_B);

my $json = JSON::PP->new->canonical;
sub b64url { my $s = encode_base64(shift, ''); $s =~ tr{+/}{-_}; $s =~ s/=+$//; return $s; }
sub hs256
{
	my ($claims) = @_;
	my $input = b64url($json->encode({ alg => 'HS256', typ => 'JWT' })) . '.' . b64url($json->encode($claims));
	return "$input." . b64url(hmac_sha256($input, 'dash-secret'));
}
my $later = time + 7200;
our %DASH_TOKEN = map { $_ => hs256({ sub => "dash-$_", role => $_, exp => $later }) } qw(read-only admin);
our $DASH_TENANT_B = 'bbbbbbbb-0000-4000-8000-00000000000b';

# A started node configured for the dashboard (nothing seeded yet).
sub dash_node
{
	my ($name) = @_;
	return qs_node($name, "queen_streams.auth = jwt\n"
		. "queen_streams.jwt_secret = 'dash-secret'\n"
		. "queen_streams.tenancy = header\n"
		. "queen_streams.jwt_trust_tenant_header = on\n"
		. "queen_streams.sample_interval = 2\n");
}

# An HTTP call as the admin, optionally as another tenant: (status, decoded body).
sub dash_call
{
	my ($node, $method, $path, $body, $tenant) = @_;
	my %h = (authorization => "Bearer $DASH_TOKEN{admin}");
	$h{'x-queen-tenant'} = $tenant if $tenant;
	return http_json($node, $method, $path, $body, \%h);
}

# Seeds the node (each step a test) and waits until the throughput samples
# hold every counted message. Returns { eu, us => partition ids of orders/eu, us,
# qid => the stream query's id, pushed, popped, acked => the sampled sums }.
sub dash_seed
{
	my ($node) = @_;
	my $call = sub { return dash_call($node, @_) };
	my $st;
	($st) = $call->('POST', '/api/v1/configure', { queue => 'orders', namespace => 'shop', options => { retryLimit => 0 } });
	is($st, 200, 'configure orders');
	# in four rounds, a sample interval apart, so the chart has a history
	my $nsamples = "SELECT jsonb_array_length(queen_streams.dashboard_throughput()->'samples')";
	for my $round (0 .. 3)
	{
		# round 2 starts in a later second than round 1 ends: the message
		# browser's time filter (whole seconds) splits them
		usleep(1_000_000 - (time * 1_000_000) % 1_000_000 + 50_000) if $round == 2;
		my $seen = $node->safe_psql('postgres', $nsamples);
		for my $p (qw(eu us))
		{
			($st) = $call->('POST', '/api/v1/push', { items => [ map { { queue => 'orders', partition => $p,
				transactionId => "$p-$_", payload => { n => $_, region => $p } } } $round * 5 + 1 .. $round * 5 + 5 ] });
			is($st, 201, "push 5 to $p (round $round)");
		}
		my $until = time + 30;
		usleep(100_000) while time < $until && $node->safe_psql('postgres', $nsamples) == $seen;
	}
	my $doc;
	($st, $doc) = $call->('GET', '/api/v1/pop/queue/orders/partition/eu?batch=5&consumerGroup=billing');
	my $eu = $doc->{messages}[0]{partitionId};
	($st, $doc) = $call->('POST', '/api/v1/ack', { transactionId => 'eu-1', partitionId => $eu, leaseId => $doc->{leaseId},
		status => 'failed', consumerGroup => 'billing', error => 'card declined' });
	ok($doc->[0]{dlq}, 'eu-1 dead-lettered');
	($st, $doc) = $call->('GET', '/api/v1/pop/queue/orders/partition/eu?batch=1&consumerGroup=billing');
	is($doc->{messages}[0]{transactionId}, 'eu-2', 'eu-2 popped');
	($st, $doc) = $call->('POST', '/api/v1/ack', { transactionId => 'eu-2', partitionId => $eu, leaseId => $doc->{leaseId},
		status => 'dlq', consumerGroup => 'billing', error => 'malformed address' });
	ok($doc->[0]{dlq}, 'eu-2 dead-lettered');
	($st, $doc) = $call->('GET', '/api/v1/pop/queue/orders/partition/eu?batch=1&consumerGroup=billing');
	is($doc->{messages}[0]{transactionId}, 'eu-3', 'eu-3 popped');
	($st, $doc) = $call->('POST', '/api/v1/ack', { transactionId => 'eu-3', partitionId => $eu, leaseId => $doc->{leaseId},
		status => 'dlq', consumerGroup => 'billing', error => 'out of stock' });
	ok($doc->[0]{dlq}, 'eu-3 dead-lettered');
	($st) = $call->('GET', '/api/v1/pop/queue/orders/partition/us?batch=3&consumerGroup=billing&autoAck=true');
	is($st, 200, 'billing read 3 of us');
	($st, $doc) = $call->('POST', '/streams/v1/queries', { name => 'orders.count', source_queue => 'orders',
		sink_queue => 'orders.counts', config_hash => 'h1' });
	my $qid = $doc->{query_id};
	($st, $doc) = $call->('GET', '/api/v1/pop/queue/orders/partition/eu?batch=4&consumerGroup=streams.orders.count');
	($st, $doc) = $call->('POST', '/streams/v1/cycle', { query_id => $qid, partition_id => $eu,
		consumer_group => 'streams.orders.count',
		state_ops => [ map { { type => 'upsert', key => "k$_", value => { n => $_ } } } 1 .. 3 ],
		push_items => [ { queue => 'orders.counts', payload => { count => 4 } } ],
		ack => { leaseId => $doc->{leaseId}, status => 'completed', count => 4 } });
	ok($doc->{success}, 'a stream cycle committed');
	# a trace on us-12, for the message browser
	($st, $doc) = $call->('GET', '/api/v1/messages?queue=orders&partition=us&limit=1');
	my $us = $doc->{messages}[0]{partitionId};
	($st) = $call->('POST', '/api/v1/traces', { transactionId => 'us-12', partitionId => $us, consumerGroup => 'billing',
		eventType => 'info', traceNames => ['checkout'], data => { step => 'shipped' } });
	is($st, 201, 'a trace on us-12');
	# a declared stream over its own queue (clicks), its events folded by the
	# stream worker before the page looks
	$node->safe_psql('postgres', q{SELECT queen_streams.create_stream('clicks.per_hour', '{"source": "clicks",
		"sink": "clicks.per_hour", "key": "$.page", "window": {"type": "tumbling", "size": 3600},
		"aggregates": {"count": {"fn": "count"}}}')});
	($st) = $call->('POST', '/api/v1/push', { items => [ map { { queue => 'clicks', partition => 'web',
		payload => { page => "p$_" } } } 1 .. 6 ] });
	is($st, 201, 'push 6 clicks');
	my $folded = "SELECT COALESCE(sum(events), 0) FROM queen_streams.stream_status('clicks.per_hour')";
	my $until = time + 60;
	usleep(200_000) while time < $until && $node->safe_psql('postgres', $folded) < 6;
	is($node->safe_psql('postgres', $folded), 6, 'the stream worker folded the 6 clicks');
	($st) = $call->('POST', '/api/v1/push', { items => [ map { { queue => 'b.only', payload => $_ } } 1 .. 3 ] }, $DASH_TENANT_B);
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
	is($pushed, 47, '47 pushed (40 orders, the sink message, 6 clicks)');

	return { eu => $eu, us => $us, qid => $qid, pushed => $pushed, popped => $popped, acked => $acked };
}

# What SQL says, for the page to show: { ov, ql, sq, groups, group (by name),
# dlq, streams, nworkers, eu_last, qstats (the rows of queue_stats), backlog
# (their sum), declared (the rows of stream_stats) }.
sub dash_truth
{
	my ($node, $eu) = @_;
	my $ov = json_sql($node, 'queen.overview()');
	my $ql = json_sql($node, 'queen.queues_list()');
	my $sq = json_sql($node, "queen.status_queue('orders')");
	my $groups = json_sql($node, 'queen.consumer_groups()');
	my %group = map { $_->{name} => json_sql($node, "queen.consumer_group('$_->{name}')") } @$groups;
	my $dlq = json_sql($node, 'queen.dlq()');
	my $streams = json_sql($node, 'queen_streams.dashboard_streams()');
	my $nworkers = $node->safe_psql('postgres', 'SELECT count(*) FROM queen_streams.http_workers()');
	my $eu_last = $node->safe_psql('postgres', "SELECT last_offset FROM queen.log_partitions WHERE id = '$eu'");
	# backlog and lag as queen_streams.queue_stats (and /metrics) count them
	my $qs = json_sql($node, "(SELECT COALESCE(jsonb_agg(jsonb_build_object('queue', queue, 'group', consumer_group,"
		. " 'backlog', backlog_messages, 'parts', partitions_with_backlog, 'leased', leased_partitions,"
		. " 'dead', dead_letters, 'lag', extract(epoch FROM clock_timestamp() - oldest_unacked_at))), '[]')"
		. " FROM queen_streams.queue_stats"
		. " WHERE tenant_id = '00000000-0000-0000-0000-000000000001')");
	my $backlog = 0;
	$backlog += $_->{backlog} for @$qs;
	my $decl = json_sql($node, "(SELECT jsonb_agg(to_jsonb(s)) FROM queen_streams.stream_stats() s"
		. " WHERE tenant_id = '00000000-0000-0000-0000-000000000001')");
	return { ov => $ov, ql => $ql, sq => $sq, groups => $groups, group => \%group, dlq => $dlq,
		streams => $streams, nworkers => $nworkers, eu_last => $eu_last, backlog => $backlog, qstats => $qs,
		declared => $decl };
}

1;
