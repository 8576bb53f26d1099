# The fault suite's load and its checks: client processes that push, pop with
# acks and run stream cycles over HTTP while the test kills the server under
# them, and the audit that follows.
#
# Clients behave as Queen's do: a 5xx or a network error (HTTP::Tiny's 599) is
# retried with backoff; a push carries client transactionIds, so a push
# retried after a lost 201 is a duplicate, not a second copy. Each client is a
# forked process writing what it was told to a log file of its own; the
# audit compares those logs with what the tables hold.
package QsFault;

use strict;
use warnings;

use Exporter 'import';
use HTTP::Tiny;
use JSON::PP;
use POSIX ();
use PostgreSQL::Test::Utils;
use QsHttp;
use Test::More;
use Time::HiRes qw(time sleep);

our @EXPORT = qw(fault_run);

my $json = JSON::PP->new->utf8->canonical;

# The tenant a client process sends as x-queen-tenant (none: the default);
# set per child by spawn's `tenant` option.
our $tenant;

# ------------------------------------------------------------------ clients

# A Queen-style call: 5xx and network errors are retried with backoff until
# `deadline`; returns (status, decoded body or undef). `url` may be a list of
# base URLs (a formation's nodes, test/t/080_ha_failover.pl): each failure
# moves the client on to the next one, as Queen's clients fail over.
my $current = 0;

sub call
{
	my ($ua, $urls, $method, $path, $body, $deadline) = @_;
	my @urls = ref $urls ? @$urls : ($urls);
	my $delay = 0.05;
	while (1)
	{
		my $url = $urls[ $current % @urls ];
		my $r = $ua->request($method, "$url$path",
			{ headers => { 'content-type' => 'application/json',
					defined $tenant ? ('x-queen-tenant' => $tenant) : () },
			  defined $body ? (content => $json->encode($body)) : () });
		if ($r->{status} < 500 || time > $deadline)
		{
			my $doc = length($r->{content} // '') ? eval { $json->decode($r->{content}) } : undef;
			return ($r->{status}, $doc);
		}
		$current++;
		sleep $delay;
		my $max = @urls > 1 ? 0.25 : 1;
		$delay = $delay * 2 > $max ? $max : $delay * 2;
	}
}

sub child_log
{
	my ($dir, $name) = @_;
	open my $fh, '>>', "$dir/$name.log" or die "$dir/$name.log: $!";
	$fh->autoflush(1);
	return $fh;
}

sub stopping { return -e "$_[0]/stop" }

# Pushes `count` messages to `queue`, `batch` per request, over `parts`
# partitions; every message's key is "<name>-<seq>", its transactionId too.
# Logs "A first last" once a batch was answered 201, with every item queued
# or duplicate.
sub pusher
{
	my (%a) = @_;
	my $ua = HTTP::Tiny->new(timeout => 10, keep_alive => 1);
	my $log = child_log($a{dir}, $a{name});
	my @sent;
	for (my $s = 0; $s < $a{count}; $s += $a{batch})
	{
		my $last = $s + $a{batch} - 1;
		$last = $a{count} - 1 if $last >= $a{count};
		my @items = map {
			my $k = "$a{name}-$_";
			{ queue => $a{queue}, partition => 'p' . ($_ % $a{parts}),
			  transactionId => $k, payload => { k => $k } }
		} $s .. $last;
		my ($st, $doc) = call($ua, $a{url}, 'POST', '/api/v1/push', { items => \@items },
			$a{deadline});
		die "$a{name}: push answered $st\n" unless $st == 201;
		die "$a{name}: push answered an item that is neither queued nor duplicate\n"
		  if grep { ($_->{status} // '') !~ /^(queued|duplicate)$/ } @$doc;
		# duplicates here: a retry of a push whose 201 was lost to a fault
		my $dups = grep { $_->{status} eq 'duplicate' } @$doc;
		print $log join('', map { "M $_->{transaction_id} $_->{message_id}\n" } @$doc),
		  "A $s $last\n", $dups ? "L $dups\n" : '';
		# Every fifth batch, one sent earlier goes again, as a client does when
		# the 201 was lost: often across a fault, to another worker and backend.
		push @sent, \@items;
		if (@sent > 3 && @sent % 5 == 0)
		{
			my $again = $sent[-4];
			($st, $doc) = call($ua, $a{url}, 'POST', '/api/v1/push', { items => $again },
				$a{deadline});
			die "$a{name}: repeated push answered $st\n" unless $st == 201;
			print $log join('', map { "M $_->{transaction_id} $_->{message_id}\n" } @$doc),
			  'D ' . scalar(grep { $_->{status} eq 'duplicate' } @$doc) . "\n";
		}
		sleep $a{pace} if $a{pace};
	}
	print $log "done\n";
}

# Pops `queue` in queue mode (no consumer group) with short leases and acks
# each batch. Logs "R key" for every message received and "K n" for acks that
# succeeded; runs until the stop file appears.
sub consumer
{
	my (%a) = @_;
	my $ua = HTTP::Tiny->new(timeout => 10, keep_alive => 1);
	my $log = child_log($a{dir}, $a{name});
	until (stopping($a{dir}))
	{
		my ($st, $doc) = call($ua, $a{url}, 'GET',
			"/api/v1/pop/queue/$a{queue}?batch=$a{batch}&wait=true&timeout=500"
			  . "&partitions=4&leaseSeconds=$a{lease}", undef, time + 30);
		next if $st == 204;
		die "$a{name}: pop answered $st\n" unless $st == 200;
		my @m = @{ $doc->{messages} };
		print $log join('', map { "R $_->{data}{k}\n" } @m);
		my @acks = map { { transactionId => $_->{transactionId}, partitionId => $_->{partitionId},
			leaseId => $_->{leaseId}, status => 'completed' } } @m;
		($st, $doc) = call($ua, $a{url}, 'POST', '/api/v1/ack/batch',
			{ acknowledgments => \@acks }, time + 30);
		# A lost answer retried, or a lease expired meanwhile: the items say
		# so; those messages come back and are received again.
		print $log 'K ' . scalar(grep { $_->{success} } @$doc) . "\n"
		  if $st == 200 && ref $doc eq 'ARRAY';
	}
	print $log "done\n";
}

# A stream worker for query `qid` (source -> sink): per partition and batch,
# reads its counter from state, and commits one cycle that adds the batch to
# the counter, pushes one sink message per source message and acks the batch.
# Logs "C n" per committed cycle, "F" per failed one.
sub streamer
{
	my (%a) = @_;
	my $ua = HTTP::Tiny->new(timeout => 10, keep_alive => 1);
	my $log = child_log($a{dir}, $a{name});
	my $group = "streams.$a{query}";
	until (stopping($a{dir}))
	{
		my ($st, $doc) = call($ua, $a{url}, 'GET',
			"/api/v1/pop/queue/$a{source}?batch=$a{batch}&wait=true&timeout=500"
			  . "&consumerGroup=$group&partitions=2&leaseSeconds=$a{lease}", undef, time + 30);
		next if $st == 204;
		die "$a{name}: pop answered $st\n" unless $st == 200;
		my (%by, %pname);
		for my $m (@{ $doc->{messages} })
		{
			push @{ $by{ $m->{partitionId} } }, $m;
			$pname{ $m->{partitionId} } = $m->{partition};
		}
		for my $pid (sort keys %by)
		{
			my $msgs = $by{$pid};
			my ($sst, $state) = call($ua, $a{url}, 'POST', '/streams/v1/state/get',
				{ query_id => $a{qid}, partition_id => $pid }, time + 30);
			if ($sst != 200)
			{
				print $log "F state/get $sst\n";
				next;
			}
			my $n = 0;
			$n = $_->{value}{n} for grep { $_->{key} eq 'n' } @{ $state->{rows} };
			my @items = map { { queue => $a{sink}, partition => $pname{$pid},
				payload => { src => $_->{data}{k} } } } @$msgs;
			my $last = $msgs->[-1];
			my ($cst, $res) = call($ua, $a{url}, 'POST', '/streams/v1/cycle', {
				query_id => $a{qid}, partition_id => $pid, consumer_group => $group,
				state_ops => [ { type => 'upsert', key => 'n', value => { n => $n + @$msgs } } ],
				push_items => \@items,
				ack => { transactionId => $last->{transactionId}, leaseId => $last->{leaseId},
					status => 'completed', count => scalar @$msgs } }, time + 30);
			# A failed cycle (lease expired, or a retry after a lost answer)
			# committed nothing or was already committed: the batch is either
			# redelivered or done.
			print $log ($cst == 200 && $res->{success} ? 'C ' . scalar(@$msgs) : "F $cst") . "\n";
		}
	}
	print $log "done\n";
}

# ------------------------------------------------------------------ the run

sub spawn
{
	my ($fn, %a) = @_;
	my $pid = fork;
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		$tenant = $a{tenant};
		my $ok = eval { $fn->(%a); 1 };
		if (!$ok)
		{
			open my $fh, '>>', "$a{dir}/$a{name}.log";
			print $fh "error $@";
			close $fh;
		}
		POSIX::_exit($ok ? 0 : 1);
	}
	return $pid;
}

sub slurp_lines
{
	my ($file) = @_;
	open my $fh, '<', $file or return ();
	my @l = <$fh>;
	chomp @l;
	return @l;
}

sub pushed_so_far
{
	my ($dir, @names) = @_;
	my $n = 0;
	for my $name (@names)
	{
		for (slurp_lines("$dir/$name.log"))
		{
			$n += $2 - $1 + 1 if /^A (\d+) (\d+)$/;
		}
	}
	return $n;
}

sub restart
{
	my ($node, $old_pid) = @_;
	# The killed postmaster must be gone, and its backends may still hold its
	# shared memory for a moment: start again until it takes.
	my $deadline = time + 60;
	sleep 0.05 while $old_pid && kill(0, $old_pid) && time < $deadline;
	while (1)
	{
		$node->{_pid} = undef;
		last if $node->start(fail_ok => 1);
		die "the server did not restart" if time > $deadline;
		sleep 0.5;
	}
	wait_http($node, 60);
}

my %faults = (
	kill9 => sub {
		my ($node) = @_;
		my $pid = $node->{_pid};
		$node->kill9;
		restart($node, $pid);
	},
	# the postmaster and every process it started at once, as a power cut or
	# the OOM killer's sweep would: in-flight requests lose their answers
	kill9_all => sub {
		my ($node) = @_;
		my $pid = $node->{_pid};
		my @kids;
		for my $stat (glob '/proc/[0-9]*/stat')
		{
			open my $fh, '<', $stat or next;
			my $line = <$fh> // next;
			push @kids, $1 if $line =~ /^(\d+) \(.*\) \S (\d+) / && $2 == $pid;
		}
		kill 'KILL', $pid, @kids;
		$node->{_pid} = undef;
		note("killed the postmaster and its " . scalar(@kids) . " processes");
		restart($node, $pid);
	},
	immediate => sub {
		my ($node) = @_;
		my $pid = $node->{_pid};
		$node->stop('immediate');
		restart($node, $pid);
	},
	terminate_worker => sub {
		my ($node, $k) = @_;
		my $pid = $node->safe_psql('postgres',
			"SELECT pid FROM queen_streams.http_workers() WHERE pid > 0 ORDER BY worker"
			  . " OFFSET $k % 2 LIMIT 1");
		$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)") if $pid;
		# its slot is restarted after a second; clients retry meanwhile
		wait_http($node, 60);
	},
);

# Frames stored in `queue`, decoded: key (payload field `field`) => copies;
# with `ids`, also key => message id.
sub stored
{
	my ($node, $queue, $field, $ids) = @_;
	my %n;
	my $out = $node->safe_psql('postgres', qq{
		SELECT f.payload::jsonb->>'$field', f.message_id
		FROM queen.log_segments s
		JOIN queen.log_partitions p ON p.id = s.partition_id
		JOIN queen.queues q ON q.id = p.queue_id,
		LATERAL queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f
		WHERE q.name = '$queue'});
	for (grep { length } split /\n/, $out)
	{
		my ($k, $id) = split /\|/;
		$n{$k}++;
		$ids->{$k} = $id if $ids;
	}
	return \%n;
}

# Every push answer named the message id that is stored for its key (a
# duplicate answers the original's id).
sub ids_match
{
	my ($dir, $pushers, $ids, $what) = @_;
	my ($answers, @wrong) = (0);
	for my $p (@$pushers)
	{
		for (slurp_lines("$dir/$p.log"))
		{
			next unless /^M (\S+) (\S+)$/;
			$answers++;
			push @wrong, "$1: answered $2, stored " . ($ids->{$1} // 'none')
			  if ($ids->{$1} // '') ne $2;
		}
	}
	ok($answers > 0 && !@wrong, "$what: every push answer names the stored message id")
	  or diag(scalar(@wrong) . " wrong, e.g. " . join('; ', @wrong[0 .. ($#wrong < 4 ? $#wrong : 4)]));
}

# Partitions of `queue` whose cursor for `group` is short of the last offset
# or still under a live lease: one line each, empty when none.
sub cursors_behind
{
	my ($node, $queue, $group) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT p.name || ': last ' || p.last_offset || ', committed ' || coalesce(c.committed, -1)
			|| coalesce(', leased until ' || c.lease_expires_at, '')
		FROM queen.log_partitions p
		JOIN queen.queues q ON q.id = p.queue_id
		LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = '$group'
		WHERE q.name = '$queue' AND p.last_offset >= 0
		  AND (coalesce(c.committed, -1) <> p.last_offset OR c.lease_expires_at > now())
		ORDER BY p.name});
}

sub exactly_once
{
	my ($got, $want, $what) = @_;
	my @missing = grep { !$got->{$_} } sort keys %$want;
	my @dups = grep { $got->{$_} > 1 } sort keys %$got;
	my @extra = grep { !$want->{$_} } sort keys %$got;
	ok(!@missing && !@dups && !@extra, "$what: each exactly once")
	  or diag(sprintf("%s: %d missing (%s), %d duplicated (%s), %d unexpected (%s)", $what,
		scalar @missing, "@missing[0 .. ($#missing < 4 ? $#missing : 4)]",
		scalar @dups, "@dups[0 .. ($#dups < 4 ? $#dups : 4)]",
		scalar @extra, "@extra[0 .. ($#extra < 4 ? $#extra : 4)]"));
}

# Runs the load against `node`, applies the faults (names of %faults) as the
# pushes progress, and checks the outcome. Options: pushers, stream_pushers,
# consumers, streamers (process counts), per_pusher (messages each), batch,
# pace (seconds a pusher waits between batches, so the faults land amid the
# load), deadline (seconds for the whole run).
sub fault_run
{
	my ($node, %o) = @_;
	my $url = "http://127.0.0.1:$node->{qs_http_port}";
	my $dir = PostgreSQL::Test::Utils::tempdir();
	my $lease = 2;
	my $per = $o{per_pusher};
	my $batch = $o{batch} // 50;
	my $parts = 4;

	for my $q (qw(fq fs fs.sink))
	{
		my ($st) = http_json($node, 'POST', '/api/v1/configure',
			{ queue => $q, options => { leaseTime => $lease, retryLimit => 1000 } });
		die "configure $q: $st" unless $st == 200;
	}
	my ($st, $reg) = http_json($node, 'POST', '/streams/v1/queries',
		{ name => 'fcount', source_queue => 'fs', sink_queue => 'fs.sink', config_hash => 'h1' });
	die "register: $st" unless $st == 200;

	my $deadline = time + $o{deadline};
	my %common = (dir => $dir, url => $url, batch => $batch, parts => $parts,
		lease => $lease, deadline => $deadline, pace => $o{pace});
	my @fq_pushers = map { "fq$_" } 1 .. $o{pushers};
	my @fs_pushers = map { "fs$_" } 1 .. $o{stream_pushers};
	my @consumers = map { "c$_" } 1 .. $o{consumers};
	my @streamers = map { "w$_" } 1 .. $o{streamers};
	my (%pid, %kind);
	$pid{$_} = spawn(\&pusher, %common, name => $_, queue => 'fq', count => $per)
	  for @fq_pushers;
	$pid{$_} = spawn(\&pusher, %common, name => $_, queue => 'fs', count => $per)
	  for @fs_pushers;
	$pid{$_} = spawn(\&consumer, %common, name => $_, queue => 'fq') for @consumers;
	$pid{$_} = spawn(\&streamer, %common, name => $_, qid => $reg->{query_id},
		query => 'fcount', source => 'fs', sink => 'fs.sink', batch => 40) for @streamers;

	my @pushers = (@fq_pushers, @fs_pushers);
	my $total = $per * @pushers;
	my @faults = @{ $o{faults} };
	my $k = 0;
	my $recovered = 0;
	# Fault k once the acknowledged pushes pass (k+1)/(n+1) of the total and
	# the clients had a second since the last recovery, so each lands amid
	# pushes, pops, acks and cycles.
	while ($k < @faults && time < $deadline)
	{
		my $done = pushed_so_far($dir, @pushers);
		if ($done >= $total * ($k + 1) / (@faults + 1) && time > $recovered + 1)
		{
			note(sprintf("fault %d (%s) after %d of %d acknowledged pushes", $k + 1, $faults[$k],
				$done, $total));
			$faults{ $faults[$k] }->($node, $k);
			$recovered = time;
			$k++;
		}
		sleep 0.05;
	}
	is($k, scalar @faults, 'every fault was applied amid the load');

	# The pushers end by themselves; then wait until every message was
	# received by a consumer and counted by the stream, within the deadline.
	for my $p (@pushers)
	{
		waitpid($pid{$p}, 0);
		is($?, 0, "pusher $p finished") or diag(join "\n", slurp_lines("$dir/$p.log"));
	}
	my (%want_fq, %want_fs);
	for my $p (@fq_pushers) { $want_fq{"$p-$_"} = 1 for 0 .. $per - 1 }
	for my $p (@fs_pushers) { $want_fs{"$p-$_"} = 1 for 0 .. $per - 1 }
	my %received;
	while (time < $deadline)
	{
		%received = ();
		for my $c (@consumers)
		{
			/^R (.*)$/ and $received{$1}++ for slurp_lines("$dir/$c.log");
		}
		my $n = $node->safe_psql('postgres',
			"SELECT coalesce(sum((value->>'n')::int), 0) FROM queen_streams.state WHERE key = 'n'");
		last if keys(%received) >= keys(%want_fq) && $n >= keys %want_fs;
		sleep 0.2;
	}
	open my $stop, '>', "$dir/stop" or die;
	close $stop;
	for my $c (@consumers, @streamers)
	{
		waitpid($pid{$c}, 0);
		is($?, 0, "client $c stopped cleanly") or diag(join "\n", slurp_lines("$dir/$c.log"));
	}

	# every acknowledged push stored exactly once
	my %ids;
	exactly_once(stored($node, 'fq', 'k', \%ids), \%want_fq, 'pushed to fq');
	exactly_once(stored($node, 'fs', 'k', \%ids), \%want_fs, 'pushed to fs');
	ids_match($dir, \@pushers, \%ids, 'fq and fs');

	# every stored message was delivered (no lease left stuck) and, once the
	# last leases expired, nothing is left to consume: each was acked
	my @undelivered = grep { !$received{$_} } sort keys %want_fq;
	is(scalar @undelivered, 0, 'every fq message was delivered to a consumer')
	  or diag("e.g. @undelivered[0 .. ($#undelivered < 4 ? $#undelivered : 4)]");
	sleep $lease + 1;
	is(cursors_behind($node, 'fq', '__QUEUE_MODE__'), '',
		'fq: every partition acked to its last offset, no lease live');
	my $left = $node->safe_psql('postgres',
		"SELECT jsonb_array_length(queen.pop('fq', batch => 1000, partitions => 10)->'messages')");
	is($left, '0', 'after lease expiry nothing is left unacked in fq');
	my $redelivered = 0;
	$redelivered += $_ - 1 for values %received;

	# every source message reflected exactly once in sink and state
	exactly_once(stored($node, 'fs.sink', 'src'), \%want_fs, 'stream sink');
	my %per_part;
	$per_part{ 'p' . ((split /-/)[1] % $parts) }++ for keys %want_fs;
	my %state = map { split /\|/ } split /\n/, $node->safe_psql('postgres',
		"SELECT p.name || '|' || (s.value->>'n') FROM queen_streams.state s"
		  . " JOIN queen.log_partitions p ON p.id = s.partition_id WHERE s.key = 'n'");
	is_deeply(\%state, \%per_part, 'stream state: each partition counted each message once');
	is(cursors_behind($node, 'fs', 'streams.fcount'), '',
		'stream source: every partition acked to its last offset, no lease live');
	$left = $node->safe_psql('postgres',
		"SELECT jsonb_array_length(queen.pop('fs', consumer_group => 'streams.fcount',"
		  . " batch => 1000, partitions => 10)->'messages')");
	is($left, '0', 'after lease expiry nothing is left unacked in the stream source');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM queen.log_dlq'), '0',
		'nothing was dead-lettered');

	my ($cycles, $failed, $dups, $lost) = (0, 0, 0, 0);
	for (map { slurp_lines("$dir/$_.log") } @pushers)
	{
		$dups += $1 if /^D (\d+)/;
		$lost += $1 if /^L (\d+)/;
	}
	for my $w (@streamers)
	{
		for (slurp_lines("$dir/$w.log")) { $cycles++ if /^C /; $failed++ if /^F/ }
	}
	note(sprintf("%d messages pushed (%d to fq, %d to fs), %d stream sink messages, %d faults;"
		  . " %d pushed again and answered duplicate, %d retried after a lost answer and answered"
		  . " duplicate, %d fq redeliveries, %d cycles committed, %d failed",
		$total, scalar keys %want_fq, scalar keys %want_fs, scalar keys %want_fs, scalar @faults,
		$dups, $lost, $redelivered, $cycles, $failed));
}

1;
