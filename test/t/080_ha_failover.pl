# High availability on a pg_auto_failover formation (scripts/ha-formation.sh):
# a monitor, a primary and a synchronous secondary on this machine, the
# listener on both data nodes. First the standby's behaviour (/health says
# standby, writes 503 with Retry-After, reads served); then concurrent HTTP
# pushers and two stream workers over 20,000 source messages, through both
# URLs with Queen-style failover (test/t/QsFault.pm), while the primary's
# pg_autoctl and postmaster are killed with SIGKILL (the node is lost). The
# monitor promotes the secondary, the clients retry against it, and the audit
# on the new primary finds every acknowledged push stored exactly once and
# every source message exactly once in the sink and the state. A pop parked
# on the lost primary is answered 503, not left hanging; how long writes were
# refused is reported.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use HTTP::Tiny;
use IPC::Run ();
use JSON::PP;
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use QsFault;
use Test::More;
use Time::HiRes qw(time sleep);

# A data node of the formation, with just what QsFault's audit asks of a node.
package HaNode;

sub new { my ($class, %a) = @_; return bless {%a}, $class }

sub safe_psql
{
	my ($self, $db, $sql) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1',
		'-h', '127.0.0.1', '-p', $self->{port}, '-d', $db ], '<', \$sql, '>', \$out, '2>', \$err)
	  or die "psql on port $self->{port} failed: $err";
	chomp $out;
	return $out;
}

package main;

my $json = JSON::PP->new->utf8->canonical;
my $script = "$FindBin::Bin/../../scripts/ha-formation.sh";
my $dir = PostgreSQL::Test::Utils::tempdir();
my ($mport, @pg, @http);
$mport = PostgreSQL::Test::Cluster::get_free_port();
push @pg, PostgreSQL::Test::Cluster::get_free_port() for 1 .. 2;
push @http, PostgreSQL::Test::Cluster::get_free_port() for 1 .. 2;
$ENV{QS_HA_DIR} = "$dir/ha";
$ENV{QS_HA_MONITOR_PORT} = $mport;
$ENV{QS_HA_PG_PORTS} = "@pg";
$ENV{QS_HA_HTTP_PORTS} = "@http";
$ENV{QS_HA_FAST} = 1;

my $started = 0;
END
{
	local $?;
	system($script, 'stop') if $started;
}

sub monitor_sql
{
	my ($sql) = @_;
	return HaNode->new(port => $mport)->safe_psql('pg_auto_failover', $sql);
}

# name => "reported/assigned" of each data node
sub states
{
	my %s = map { my ($n, $r, $g) = split /\|/; ($n => "$r/$g") } split /\n/,
	  monitor_sql("SELECT nodename, reportedstate, goalstate FROM pgautofailover.node");
	return \%s;
}

sub show { my $s = states(); return join ', ', map { "$_ $s->{$_}" } sort keys %$s }

my $ua = HTTP::Tiny->new(timeout => 10, keep_alive => 0);

sub req
{
	my ($url, $method, $path, $body) = @_;
	my $r = $ua->request($method, "$url$path",
		{ headers => { 'content-type' => 'application/json' },
		  defined $body ? (content => $json->encode($body)) : () });
	my $doc = length($r->{content} // '') ? eval { $json->decode($r->{content}) } : undef;
	return ($r->{status}, $doc, $r->{headers});
}

# ---- the formation
my $t0 = time;
$started = 1;
if (!is(system($script, 'start'), 0, 'ha-formation.sh start: a primary and a synchronous secondary'))
{
	for my $log (grep { -f } map { "$ENV{QS_HA_DIR}/$_/pg_autoctl.log" } qw(monitor node1 node2))
	{
		my @l = QsFault::slurp_lines($log);
		diag(join "\n", "== $log", @l[ ($#l > 20 ? $#l - 20 : 0) .. $#l ]);
	}
	done_testing();
	exit 1;
}
note(sprintf("formation up in %.1f s: %s", time - $t0, show()));
my $s = states();
my ($pname) = grep { $s->{$_} eq 'primary/primary' } keys %$s;
my ($sname) = grep { $s->{$_} eq 'secondary/secondary' } keys %$s;
die "no primary and secondary: " . show() unless $pname && $sname;
my %idx = (node1 => 0, node2 => 1);
my $primary = HaNode->new(port => $pg[ $idx{$pname} ], name => $pname);
my $standby = HaNode->new(port => $pg[ $idx{$sname} ], name => $sname);
my $purl = "http://127.0.0.1:$http[ $idx{$pname} ]";
my $surl = "http://127.0.0.1:$http[ $idx{$sname} ]";

isnt($primary->safe_psql('postgres', 'SHOW synchronous_standby_names'), '',
	'the primary names a synchronous standby');
is($primary->safe_psql('postgres',
	"SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'"), 'quorum',
	'the secondary replicates synchronously (quorum of one)');
is($primary->safe_psql('postgres', 'SHOW synchronous_commit'), 'on',
	'a commit waits for the standby to flush its WAL');

# ---- setup on the primary
for my $q (qw(fs fs.sink idle probe))
{
	my ($st) = req($purl, 'POST', '/api/v1/configure',
		{ queue => $q, options => { leaseTime => 2, retryLimit => 1000 } });
	die "configure $q: $st" unless $st == 200;
}
my ($st, $reg) = req($purl, 'POST', '/streams/v1/queries',
	{ name => 'fcount', source_queue => 'fs', sink_queue => 'fs.sink', config_hash => 'h1' });
die "register: $st" unless $st == 200;

# ---- the standby's listener
my ($doc, $hdr);
for (1 .. 100)	# until the standby replayed CREATE EXTENSION
{
	($st, $doc) = req($surl, 'GET', '/health');
	last if $st == 200;
	sleep 0.1;
}
is($st, 200, 'standby: /health answers');
is($doc->{status}, 'standby', 'standby: /health says standby');
is($doc->{primary}, "127.0.0.1:$primary->{port}", 'standby: /health names the primary it streams from');
($st, $doc) = req($purl, 'GET', '/health');
is($doc->{status} . '/' . $doc->{role}, 'healthy/primary', 'primary: /health says healthy, primary');
($st, $doc, $hdr) = req($surl, 'POST', '/api/v1/push',
	{ items => [ { queue => 'probe', transactionId => 'standby-push', payload => {} } ] });
is($st, 503, 'standby: a push answers 503');
is($hdr->{'retry-after'}, '1', 'standby: with Retry-After');
($st) = req($surl, 'GET', '/api/v1/pop/queue/fs?batch=1');
is($st, 503, 'standby: a pop (it takes leases) answers 503');
($st) = req($surl, 'POST', '/streams/v1/state/get', { query_id => $reg->{query_id}, partition_id => $reg->{query_id} });
is($st, 503, 'standby: streams state/get (the read of a cycle) answers 503');
my $seen = 0;
for (1 .. 50)
{
	($st, $doc) = req($surl, 'GET', '/api/v1/resources/queues');
	last if $st == 200 && ($seen = grep { $_->{name} eq 'fs.sink' } @{ $doc->{queues} // [] });
	sleep 0.1;
}
is($st, 200, 'standby: a read is served');
ok($seen, 'standby: the read shows the queues configured on the primary');
is($standby->safe_psql('postgres', "SELECT count(*) FROM queen.queues WHERE name LIKE 'fs%'"), '2',
	'standby: SQL reads the replicated tables too');
my $workers_sql = 'SELECT string_agg(pid::text, \' \' ORDER BY worker) FROM queen_streams.http_workers()';
my $standby_workers = $standby->safe_psql('postgres', $workers_sql);

# ---- the load, through both URLs
my $work = "$dir/load";
mkdir $work or die;
my $per = 10_000;
my @pushers = qw(fs1 fs2);
my @streamers = qw(w1 w2);
my $deadline = time + 150;
my %pid;
for my $i (0 .. 1)
{
	# half of the clients know the primary first, half the standby
	my $urls = $i == 0 ? [ $purl, $surl ] : [ $surl, $purl ];
	my %c = (dir => $work, url => $urls, batch => 50, parts => 4, lease => 2,
		deadline => $deadline, pace => 0.01);
	$pid{ $pushers[$i] } = QsFault::spawn(\&QsFault::pusher, %c, name => $pushers[$i],
		queue => 'fs', count => $per);
	$pid{ $streamers[$i] } = QsFault::spawn(\&QsFault::streamer, %c, name => $streamers[$i],
		qid => $reg->{query_id}, query => 'fcount', source => 'fs', sink => 'fs.sink', batch => 40);
}

# One push at a time to `probe` (each retried across both URLs until it is
# answered 201): the times of its answers show how long writes were refused.
$pid{probe} = QsFault::spawn(sub {
	my (%a) = @_;
	my $pua = HTTP::Tiny->new(timeout => 5, keep_alive => 1);
	open my $log, '>>', "$a{dir}/probe.log" or die;
	$log->autoflush(1);
	my ($n, $k) = (0, 0);
	until (QsFault::stopping($a{dir}) || time > $a{deadline})
	{
		my $sent = time;
		my $r = $pua->request('POST', "$a{urls}[$k % 2]/api/v1/push",
			{ headers => { 'content-type' => 'application/json' },
			  content => $json->encode({ items => [ { queue => 'probe',
				transactionId => "probe-$n", payload => { k => "probe-$n" } } ] }) });
		if ($r->{status} == 201)
		{
			printf $log "ok %.3f %.3f %d\n", $sent, time, $n++;
		}
		else
		{
			printf $log "no %.3f %d\n", time, $r->{status};
			$k++;
		}
		sleep 0.02;
	}
	print $log "done $n\n";
}, dir => $work, name => 'probe', urls => [ $purl, $surl ], deadline => $deadline);

# the kill, amid the load: once 40% of the pushes were acknowledged
my $total = $per * @pushers;
sleep 0.05 while QsFault::pushed_so_far($work, @pushers) < $total * 0.4 && time < $deadline;

# a pop parked on the primary's listener, on a queue that stays empty
my $parked = QsFault::spawn(sub {
	my (%a) = @_;
	my $r = HTTP::Tiny->new(timeout => 60)->request('GET',
		"$a{url}/api/v1/pop/queue/idle?wait=true&timeout=30000");
	open my $log, '>', "$a{dir}/parked.log" or die;
	printf $log "%d %.3f\n", $r->{status}, time;
}, dir => $work, name => 'parked', url => $purl);
sleep 1;

my $pgdata = "$ENV{QS_HA_DIR}/$pname/pgdata";
open my $pf, '<', "$pgdata/postmaster.pid" or die "$pgdata/postmaster.pid: $!";
my $postmaster = <$pf> + 0;
close $pf;
open my $sf, '<', "$ENV{QS_HA_DIR}/$pname/pg_autoctl.run.pid" or die;
my $supervisor = <$sf> + 0;
close $sf;
# pg_autoctl's supervisor and its services, else they would restart the
# postmaster on the spot and no failover would be needed
my @keeper = ($supervisor, map { $_->[0] } grep { $_->[1] == $supervisor }
	  map { [ split ' ' ] } split /\n/, `ps -o pid=,ppid= -e`);
my $acked = QsFault::pushed_so_far($work, @pushers);
my $kill_at = time;
kill 'KILL', @keeper, $postmaster;
note("killed $pname (pg_autoctl @keeper, postmaster $postmaster) after $acked of $total"
	  . " acknowledged pushes");

# pg_auto_failover promotes the secondary
my $promoted = 0;
while (time < $deadline)
{
	my $st = states();
	if (($st->{$sname} // '') =~ m{^(wait_primary|primary)/(wait_primary|primary)$})
	{
		$promoted = 1;
		last;
	}
	sleep 0.2;
}
ok($promoted, "pg_auto_failover promoted $sname");
note(sprintf("monitor: %s, %.1f s after the kill", show(), time - $kill_at));

waitpid($parked, 0);
my ($pst, $pat) = split ' ', (join '', QsFault::slurp_lines("$work/parked.log"));
is($pst, 503, 'the pop parked on the lost primary was answered 503, not left hanging');
note(sprintf("the parked pop was answered %s %.2f s after the kill", $pst // '-',
	($pat // 0) - $kill_at));

($st, $doc) = req($surl, 'GET', '/health');
is($doc->{status} . '/' . $doc->{role}, 'healthy/primary',
	'the promoted node says healthy, primary');
is($standby->safe_psql('postgres', $workers_sql), $standby_workers,
	'the promoted node serves with the workers it had as a standby (no restart)');

for my $p (@pushers)
{
	waitpid($pid{$p}, 0);
	is($?, 0, "pusher $p finished") or diag(join "\n", QsFault::slurp_lines("$work/$p.log"));
}
my $node = $standby;	# the new primary
my %want;
for my $p (@pushers) { $want{"$p-$_"} = 1 for 0 .. $per - 1 }
while (time < $deadline)
{
	my $n = $node->safe_psql('postgres',
		"SELECT coalesce(sum((value->>'n')::int), 0) FROM queen_streams.state WHERE key = 'n'");
	last if $n >= keys %want;
	sleep 0.2;
}
open my $stop, '>', "$work/stop" or die;
close $stop;
for my $c (@streamers, 'probe')
{
	waitpid($pid{$c}, 0);
	is($?, 0, "client $c stopped cleanly") or diag(join "\n", QsFault::slurp_lines("$work/$c.log"));
}

# ---- the audit, on the new primary
my %ids;
QsFault::exactly_once(QsFault::stored($node, 'fs', 'k', \%ids), \%want,
	'every acknowledged push, on the new primary');
QsFault::ids_match($work, \@pushers, \%ids, 'fs');
my ($probes) = map { /^done (\d+)/ ? $1 : () } QsFault::slurp_lines("$work/probe.log");
my %want_probe = map { ("probe-$_" => 1) } 0 .. ($probes // 0) - 1;
QsFault::exactly_once(QsFault::stored($node, 'probe', 'k'), \%want_probe,
	'every acknowledged probe push, on the new primary');
QsFault::exactly_once(QsFault::stored($node, 'fs.sink', 'src'), \%want, 'stream sink');
my %per_part;
$per_part{ 'p' . ((split /-/)[1] % 4) }++ for keys %want;
my %state = map { split /\|/ } split /\n/, $node->safe_psql('postgres',
	"SELECT p.name || '|' || (s.value->>'n') FROM queen_streams.state s"
	  . " JOIN queen.log_partitions p ON p.id = s.partition_id WHERE s.key = 'n'");
is_deeply(\%state, \%per_part, 'stream state: each partition counted each message once');
sleep 3;
is(QsFault::cursors_behind($node, 'fs', 'streams.fcount'), '',
	'stream source: every partition acked to its last offset, no lease live');
is($node->safe_psql('postgres', 'SELECT count(*) FROM queen.log_dlq'), '0',
	'nothing was dead-lettered');

# How long writes were refused: the longest time between two of the probe's
# 201s, and from the kill to the 201 of the first push sent after it (one in
# flight at the kill may still be answered by the old primary, replicated).
my ($prev, $gap, $first_ok, $refused) = (0, 0, 0, 0);
for (QsFault::slurp_lines("$work/probe.log"))
{
	if (/^ok (\S+) (\S+)/)
	{
		$gap = $2 - $prev if $prev && $2 - $prev > $gap;
		$prev = $2;
		$first_ok ||= $2 if $1 > $kill_at;
	}
	$refused++ if /^no (\S+)/ && $1 > $kill_at;
}
ok($first_ok > 0, 'writes were served again after the failover');
my ($cycles, $failed) = (0, 0);
for my $w (@streamers)
{
	for (QsFault::slurp_lines("$work/$w.log")) { $cycles++ if /^C /; $failed++ if /^F/ }
}
diag(sprintf("failover: writes refused for %.2f s (the longest time between two 201s;"
	  . " kill to the 201 of the first push sent after it: %.2f s; %d refused or failed probe"
	  . " pushes); %d source messages, %d cycles committed, %d failed",
	$gap, $first_ok - $kill_at, $refused, scalar keys %want, $cycles, $failed));

done_testing();
