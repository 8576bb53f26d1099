# Dedup across a crash: pushes with client transaction ids, the postmaster
# killed with SIGKILL (no shutdown, no checkpoint; shared memory, and with it
# the dedup cache, starts empty), restart, resend. Every answered push is a
# duplicate naming its original id; a push that was in flight (never
# answered, or prepared and then resolved) is stored at most once and,
# after its retry, exactly once.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use JSON::PP;
use POSIX ();
use QsHttp;
use Test::More;
use Time::HiRes qw(time usleep);

my $json = JSON::PP->new->canonical;
my $node = qs_node('dedup_crash', "max_prepared_transactions = 4\n");

sub body
{
	my ($queue, $prefix, $from, $to) = @_;
	return { items => [ map {
		{ queue => $queue, partition => 'p' . ($_ % 3), transactionId => "$prefix-$_",
		  payload => { k => "$prefix-$_", pad => 'x' x 40 } } } $from .. $to ] };
}

# key => copies stored in `queue`, and key => message id
sub stored
{
	my ($queue) = @_;
	my (%n, %id);
	for (split /\n/, $node->safe_psql('postgres', qq{
		SELECT f.payload::jsonb->>'k', f.message_id
		  FROM queen.log_segments s
		  JOIN queen.log_partitions p ON p.id = s.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id,
		       LATERAL queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f
		 WHERE q.name = '$queue'}))
	{
		my ($k, $m) = split /\|/;
		$n{$k}++;
		$id{$k} = $m;
	}
	return (\%n, \%id);
}

sub crash
{
	my $pid = $node->{_pid};
	$node->kill9;
	my $deadline = time + 60;
	usleep(50_000) while kill(0, $pid) && time < $deadline;
	while (1)
	{
		$node->{_pid} = undef;
		last if $node->start(fail_ok => 1);
		die "the server did not restart" if time > $deadline;
		sleep 0.5;
	}
	wait_http($node, 60);
}

# 1. Answered pushes: 10 requests of 100 items over HTTP.
my %answered;
for my $r (0 .. 9)
{
	my ($st, $doc) = http_json($node, 'POST', '/api/v1/push', body('acked', 'a', $r * 100, $r * 100 + 99));
	die "push answered $st" unless $st == 201;
	$answered{$_->{transaction_id}} = $_->{message_id} for @$doc;
}
is(scalar(keys %answered), 1000, '1,000 pushes answered');

# 2. In flight: one push open in a transaction, two prepared.
my $open = $node->background_psql('postgres');
$open->query_safe('BEGIN');
$open->query_safe("SELECT queen.push_text('" . $json->encode(body('open', 'o', 0, 299)) . "')");
my %prepared;
for my $gid ('commit_me', 'rollback_me')
{
	my $s = $node->background_psql('postgres');
	$s->query_safe('BEGIN');
	my $out = $s->query_safe("SELECT queen.push_text('" . $json->encode(body("prep_$gid", $gid, 0, 99)) . "')::text");
	$prepared{$gid} = { map { $_->{transaction_id} => $_->{message_id} } @{ $json->decode($out) } };
	$s->query_safe("PREPARE TRANSACTION '$gid'");
	$s->quit;
}

# 3. In flight over HTTP: a 20,000-item push killed while it runs.
my $big = body('inflight', 'i', 0, 19_999);
my $pid = fork() // die "fork: $!";
if ($pid == 0)
{
	my ($st) = http($node, 'POST', '/api/v1/push', $big);
	# _exit: the child must not run the test's END blocks (they stop the node)
	POSIX::_exit($st == 201 ? 0 : 1);
}
my $deadline = time + 30;
until ($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE query = 'POST /api/v1/push' AND state = 'active'"
		  . " AND pid <> pg_backend_pid()") > 0 || time > $deadline)
{
	usleep(5_000);
}
crash();
waitpid($pid, 0);
my $got_answer = $? == 0;
note($got_answer ? 'the in-flight push was answered before the kill' : 'the in-flight push got no answer');
$open->{run}->kill_kill;

# After the crash: the answered pushes are each stored once; resending them
# answers duplicate with the original id.
my ($n, $ids) = stored('acked');
is(scalar(grep { $n->{$_} == 1 } keys %$n), 1000, 'every answered push is stored once after the crash');
my ($dups, $same) = (0, 0);
for my $r (0 .. 9)
{
	my ($st, $doc) = http_json($node, 'POST', '/api/v1/push', body('acked', 'a', $r * 100, $r * 100 + 99));
	for (@$doc)
	{
		$dups++ if $_->{status} eq 'duplicate';
		$same++ if $_->{message_id} eq ($answered{$_->{transaction_id}} // '');
	}
}
is($dups, 1000, 'every resent push is a duplicate');
is($same, 1000, 'and names its original message id');
($n) = stored('acked');
is(scalar(grep { $n->{$_} != 1 } keys %$n), 0, 'nothing stored twice after the resend');

# The open transaction died with the server: nothing of it is stored, and
# its retry stores everything once.
($n) = stored('open');
is(scalar(keys %$n), 0, 'the push open at the crash stored nothing');
my $retry = json_sql($node, "queen.push_text('" . $json->encode(body('open', 'o', 0, 299)) . "')");
is(scalar(grep { $_->{status} eq 'queued' } @$retry), 300, 'its retry is queued');
($n) = stored('open');
is(scalar(grep { $n->{$_} == 1 } keys %$n), 300, 'and stored once');

# The prepared pushes survived the crash. Committed: their retry is a
# duplicate naming the prepared ids; rolled back: their retry is new.
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '2', 'both prepared pushes survived');
$node->safe_psql('postgres', "COMMIT PREPARED 'commit_me'");
$node->safe_psql('postgres', "ROLLBACK PREPARED 'rollback_me'");
for my $gid ('commit_me', 'rollback_me')
{
	my $want = $gid eq 'commit_me' ? 'duplicate' : 'queued';
	my $doc = json_sql($node, "queen.push_text('" . $json->encode(body("prep_$gid", $gid, 0, 99)) . "')");
	is(scalar(grep { $_->{status} eq $want } @$doc), 100, "$gid: its retry is $want");
	is(scalar(grep { $_->{message_id} eq $prepared{$gid}{ $_->{transaction_id} } } @$doc),
		$gid eq 'commit_me' ? 100 : 0, "$gid: " . ($gid eq 'commit_me' ? 'with the prepared ids' : 'with new ids'));
	($n) = stored("prep_$gid");
	is(scalar(grep { $n->{$_} == 1 } keys %$n), 100, "$gid: stored once");
}

# The HTTP push killed in flight: stored at most once, whole or not at all;
# its retry leaves each of its messages stored exactly once.
($n) = stored('inflight');
my $before = scalar(keys %$n);
ok(($before == 0 || $before == 20_000) && !grep({ $n->{$_} != 1 } keys %$n),
	"the killed push is stored whole or not at all ($before), never twice");
my ($st, $doc) = http_json($node, 'POST', '/api/v1/push', $big);
is($st, 201, 'its retry answers 201');
is(scalar(grep { $_->{status} eq ($before ? 'duplicate' : 'queued') } @$doc), 20_000,
	'its retry is ' . ($before ? 'all duplicates' : 'all queued'));
($n) = stored('inflight');
is(scalar(grep { $n->{$_} == 1 } keys %$n), 20_000, 'after the retry every message is stored exactly once');
is(scalar(grep { $n->{$_} != 1 } keys %$n), 0, 'none twice');

$node->stop;
done_testing();
