# The transactional pipeline example (examples/txn_pipeline.pl) end to end
# over HTTP only: every input yields exactly one output, even when the
# worker is killed with SIGKILL halfway and started again, and a transaction
# replayed after a lost answer changes nothing.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = qs_node('txn_example');
my $url = "http://127.0.0.1:$node->{qs_http_port}";
my $example = "$FindBin::Bin/../../examples/txn_pipeline.pl";

# A short lease, so the batch a killed worker held comes back soon.
my ($st) = http_json($node, 'POST', '/api/v1/configure',
	{ queue => 'numbers', options => { leaseTime => 2, retryDelay => 0 } });
is($st, 200, 'source configured');
my @items = map { { queue => 'numbers', partition => 'p' . ($_ % 4), transactionId => "n$_",
	payload => { n => $_ } } } 1 .. 400;
while (my @chunk = splice(@items, 0, 50))
{
	($st) = http_json($node, 'POST', '/api/v1/push', { items => \@chunk });
	die "push failed: $st" unless $st == 201;
}

my @args = ($^X, $example, '--url', $url, '--batch', '7', '--wait', '500');
my $h = IPC::Run::start([@args], '>', \my $out1, '2>', \my $err1);
ok($node->poll_query_until('postgres',
	"SELECT coalesce(sum(pushed), 0) >= 60 FROM queen_streams.metrics WHERE queue = 'squares'"),
	'the first run commits transactions');
$h->signal('KILL');
eval { $h->finish };

my ($out2, $err2);
IPC::Run::run([ @args, '--exit-idle', '4' ], '>', \$out2, '2>', \$err2, IPC::Run::timeout(120))
  or diag "second run: $err2";

# A transaction replayed after a lost answer: its pushes are duplicates and
# its ack finds the input already acked, so it rolls back whole.
my $replay = { operations => [
	{ type => 'push', items => [ { queue => 'squares', partition => 'p1', transactionId => 'n1.sq',
		payload => { n => 1, square => 1, source => 'n1' } } ] },
	{ type => 'ack', transactionId => 'n1', status => 'completed', consumerGroup => 'squarer',
	  partitionId => $node->safe_psql('postgres',
		"SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
		  . " WHERE q.name = 'numbers' AND p.name = 'p1'") } ] };
my $doc;
($st, $doc) = http_json($node, 'POST', '/api/v1/transaction', $replay);
is($st, 200, 'a replayed transaction answers 200');
is($doc->{success}, JSON::PP::false, 'and rolls back');

my (%seen, $dups, $wrong);
while (1)
{
	my $r = json_sql($node, "queen.pop('squares', batch => 1000, auto_ack => true, partitions => 10)");
	last unless @{ $r->{messages} };
	for my $m (@{ $r->{messages} })
	{
		my $d = $m->{data};
		$dups++ if $seen{ $d->{source} }++;
		$wrong++ if $d->{square} != $d->{n} * $d->{n} || $d->{source} ne "n$d->{n}";
		$wrong++ if $m->{partition} ne 'p' . ($d->{n} % 4);
	}
}
is(scalar keys %seen, 400, 'every input has its output');
is($dups // 0, 0, 'none twice');
is($wrong // 0, 0, 'each derived right, in its input\'s partition');
is($node->safe_psql('postgres',
	"SELECT count(*) = 4 AND bool_and(c.committed = p.last_offset)"
	  . " FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id"
	  . " JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'numbers' AND c.consumer_group = 'squarer'"),
	't', 'every input acked');

$node->stop;
done_testing();
