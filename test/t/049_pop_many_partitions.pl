# A queue of 20,000 partitions holding one message each, drained over HTTP by
# 8 concurrent consumers (batch 10 from up to 10 partitions a pop, acked in a
# batch): in queue mode every message is delivered exactly once and none is
# left behind; then by a consumer group whose drain is cut by a kill -9 of
# the postmaster and every process it started: nothing is lost (a message
# whose ack died with the server comes again), and no cursor is left behind.
#
# And what the drain's speed rests on: once a group's ready set is built, a
# wildcard pop reads a handful of partition rows, not all 20,000 (the
# transaction's own tuple counters, no timing).
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use HTTP::Tiny;
use JSON::PP;
use POSIX ();
use PostgreSQL::Test::Utils;
use QsHttp;
use Test::More;
use Time::HiRes qw(time sleep);

my $N = 20000;
my $CONSUMERS = 8;
my $node = qs_node('pop_many_partitions');
my $url = "http://127.0.0.1:$node->{qs_http_port}";
my $dir = PostgreSQL::Test::Utils::tempdir();
my $json = JSON::PP->new->utf8->canonical;

# 20,000 partitions, one message each (payload k = the partition's number)
for (my $from = 1; $from <= $N; $from += 5000)
{
	$node->safe_psql('postgres', qq{
		SELECT queen.push(jsonb_build_object('items', (
		  SELECT jsonb_agg(jsonb_build_object('queue', 'wide', 'partition', 'p' || i,
		                   'transactionId', 't' || i, 'payload', jsonb_build_object('k', i)))
		    FROM generate_series($from, @{[ $from + 4999 ]}) i)))});
}
is($node->safe_psql('postgres',
	"SELECT count(*) FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
	  WHERE q.name = 'wide' AND p.last_offset = 0"), $N, "$N partitions of one message");

# Partition and cursor rows one wildcard pop reads: the tables' counters
# around it, each transaction's flushed as it ends (nothing else runs yet).
# The first pop of a group builds its set: the second is measured.
sub rows_read
{
	my ($pop) = @_;
	my $count = "SELECT sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))
	               FROM pg_stat_user_tables
	              WHERE relid IN ('queen.log_partitions'::regclass, 'queen.log_consumers'::regclass)";
	my @out = split /\n/, $node->safe_psql('postgres', qq{
		SET stats_fetch_consistency = none;
		SELECT pg_stat_force_next_flush();
		$count;
		SELECT pg_stat_force_next_flush();
		SELECT ($pop) IS NOT NULL;
		SELECT pg_stat_force_next_flush();
		$count;});
	@out = grep { /^\d+$/ } @out;
	return $out[-1] - $out[0];
}
$node->safe_psql('postgres', "SELECT queen.pop('wide', batch => 1, consumer_group => 'probe')");
my $read = rows_read("queen.pop('wide', batch => 1, consumer_group => 'probe')");
cmp_ok($read, '<', 200, "a consumer group's pop reads $read partition and cursor rows, not $N");
$read = rows_read("queen.pop('wide', batch => 5, consumer_group => 'probe', partitions => 5)");
cmp_ok($read, '<', 200, "a pop of 5 partitions reads $read rows");
# ---- consumers: forked processes, retrying 5xx and network errors as Queen's do

sub consumer
{
	my ($name, $group) = @_;
	my $ua = HTTP::Tiny->new(timeout => 10, keep_alive => 1);
	open my $log, '>>', "$dir/$name.log" or die;
	$log->autoflush(1);
	my $q = "/api/v1/pop/queue/wide?batch=10&partitions=10&leaseSeconds=3&wait=true&timeout=300"
	  . ($group ? "&consumerGroup=$group" : '');
	until (-e "$dir/stop")
	{
		my $r = $ua->get("$url$q");
		if ($r->{status} >= 500) { sleep 0.2; next; }
		next if $r->{status} == 204;
		die "$name: pop answered $r->{status}\n" unless $r->{status} == 200;
		my @m = @{ $json->decode($r->{content})->{messages} };
		print $log join('', map { "R $_->{data}{k}\n" } @m);
		my $acks = $json->encode({ acknowledgments => [ map { {
			transactionId => $_->{transactionId}, partitionId => $_->{partitionId},
			leaseId => $_->{leaseId}, status => 'completed',
			$group ? (consumerGroup => $group) : () } } @m ] });
		$r = $ua->post("$url/api/v1/ack/batch",
			{ headers => { 'content-type' => 'application/json' }, content => $acks });
		# an answer lost with the server: those messages come again
		next unless $r->{status} == 200;
		print $log 'K ' . scalar(grep { $_->{success} } @{ $json->decode($r->{content}) }) . "\n";
	}
}

sub drain
{
	my ($phase, $group, $during) = @_;
	unlink "$dir/stop";
	my @kids;
	for my $i (1 .. $CONSUMERS)
	{
		my $pid = fork // die "fork: $!";
		if ($pid == 0)
		{
			my $ok = eval { consumer("$phase$i", $group); 1 };
			POSIX::_exit($ok ? 0 : 1);
		}
		push @kids, $pid;
	}
	my $grp = $group // '__QUEUE_MODE__';
	my $behind = $N;
	my $start = time;
	my $deadline = $start + 150;
	while (time < $deadline)
	{
		$behind = $node->safe_psql('postgres', qq{
			SELECT count(*) FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
			  LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = '$grp'
			 WHERE q.name = 'wide' AND (c.committed IS NULL OR c.committed < p.last_offset)});
		last if $behind == 0;
		$during->($behind) if $during;
		sleep 0.5;
	}
	my $secs = time - $start;
	open my $fh, '>', "$dir/stop" or die;
	close $fh;
	my $failed = 0;
	for (@kids) { waitpid($_, 0); $failed++ if $? != 0; }
	is($failed, 0, "$phase: every consumer ran to the end");
	is($behind, 0, sprintf("$phase: every partition consumed (%.1f s)", $secs));
	my (%got, $acked);
	for my $i (1 .. $CONSUMERS)
	{
		open my $in, '<', "$dir/$phase$i.log" or next;
		while (<$in>)
		{
			$got{$1}++ if /^R (\d+)$/;
			$acked += $1 if /^K (\d+)$/;
		}
	}
	return (\%got, $acked // 0);
}

# ---- queue mode: exactly once
my ($got, $acked) = drain('queue', undef);
is(scalar(keys %$got), $N, 'queue mode: every message delivered');
is(scalar(grep { $_ != 1 } values %$got), 0, 'queue mode: none delivered twice');
is($acked, $N, 'queue mode: every ack succeeded');

# ---- a group that starts now, met long after the queue was filled: it
# builds its set once, then its pops (its set young or not) read a handful
$read = rows_read("queen.pop('wide', batch => 1, consumer_group => 'late', subscription_mode => 'new')");
note("a new group's first pop (it builds the set) reads $read rows");
$read = rows_read("queen.pop('wide', batch => 1, consumer_group => 'late', subscription_mode => 'new')");
cmp_ok($read, '<', 200, "a group that starts now reads $read rows from its second pop on");

# ---- a consumer group, the server killed mid-drain
my $killed = 0;
($got, $acked) = drain('group', 'g', sub {
	my ($behind) = @_;
	return if $killed || $behind > $N / 2;
	my $pid = $node->{_pid};
	my @kids;
	for my $stat (glob '/proc/[0-9]*/stat')
	{
		open my $fh, '<', $stat or next;
		my $line = <$fh> // next;
		push @kids, $1 if $line =~ /^(\d+) \(.*\) \S (\d+) / && $2 == $pid;
	}
	kill 'KILL', $pid, @kids;
	$killed = 1;
	note("killed the postmaster and its " . scalar(@kids) . " processes with $behind partitions to go");
	my $deadline = time + 60;
	sleep 0.05 while kill(0, $pid) && time < $deadline;
	while (1)
	{
		$node->{_pid} = undef;
		last if $node->start(fail_ok => 1);
		die "the server did not restart" if time > $deadline;
		sleep 0.5;
	}
	wait_http($node, 60);
});
ok($killed, 'the server was killed mid-drain');
is(scalar(keys %$got), $N, 'group: every message delivered across the crash');
my $again = grep { $_ > 1 } values %$got;
note("group: $again messages delivered again after the crash");
is($node->safe_psql('postgres',
	"SELECT count(*) FROM queen.log_consumers WHERE lease_expires_at > clock_timestamp() + interval '1 minute'"),
	0, 'no lease left stuck');

$node->stop;
done_testing();
