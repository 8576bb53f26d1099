# A group waits for its clients to come back (group_commit_await): the
# connections the last group answered are awaited, and a group that is
# not full runs once each has sent its next request or closed, or once
# the await has passed. One worker, and an await of 5 s, far longer than
# anything here should take, so that waiting and not waiting cannot be
# confused.
#
# - a lone client sending one request after another never waits;
# - a request from another connection waits for the awaited one, and
#   both then run in one group (one commit for two requests);
# - an awaited connection that closes is no longer awaited: the waiting
#   request runs.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use IO::Socket::INET;
use JSON::PP;
use Test::More;

my $node = qs_node('group_await', <<'EOF');
queen_streams.http_workers = 1
queen_streams.group_commit_max_requests = 64
queen_streams.group_commit_max_wait = 0
queen_streams.group_commit_await = 5s
EOF
my $json = JSON::PP->new;

sub connect_one
{
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $node->{qs_http_port},
		Proto => 'tcp') or die "connect: $!";
	$s->autoflush(1);
	return $s;
}

sub send_push
{
	my ($s, $n) = @_;
	my $body = $json->encode({ items => [ { queue => 'aw', payload => { n => $n } } ] });
	syswrite($s, "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
		  . "Content-Length: " . length($body) . "\r\n\r\n$body");
}

# (group commits, requests in them) so far
sub counters
{
	my (undef, $m) = http($node, 'GET', '/metrics');
	my ($c) = $m =~ /^queen_streams_http_group_commits_total (\d+)/m;
	my ($r) = $m =~ /^queen_streams_http_group_requests_total (\d+)/m;
	return ($c, $r);
}

my $a = connect_one();
my $b = connect_one();

# A lone client: each request runs at once, its own connection being the
# one awaited.
for my $n (1 .. 3)
{
	send_push($a, $n);
	my ($st, undef, $secs) = read_response($a, 10);
	is($st, 201, "lone client, push $n answered");
	cmp_ok($secs, '<', 4, "lone client, push $n did not wait for the await");
}

# Another connection's push waits for the awaited one ...
my ($c0, $r0) = counters();
send_push($b, 10);
my ($st_b) = read_response($b, 1);
is($st_b, undef, "another connection's push waits while the last group's connection is awaited");
# ... which comes back: both run in one group.
send_push($a, 11);
my ($st_a) = read_response($a, 10);
($st_b) = read_response($b, 10);
is($st_a, 201, 'the awaited connection is answered');
is($st_b, 201, 'the waiting push is answered with it');
my ($c1, $r1) = counters();
is($c1 - $c0, 1, 'one commit');
is($r1 - $r0, 2, 'for both requests');

# Both are awaited now. b sends and waits for a; a closes instead.
send_push($b, 20);
($st_b) = read_response($b, 1);
is($st_b, undef, 'a push waits for the other awaited connection');
close $a;
my $secs;
($st_b, undef, $secs) = read_response($b, 10);
is($st_b, 201, 'it runs once that connection closed');
cmp_ok($secs, '<', 4, 'without waiting out the await');

is($node->safe_psql('postgres', q{SELECT sum(p.last_offset + 1) FROM queen.log_partitions p
	JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'aw'}), '6', 'all six pushes stored');

close $b;
$node->stop;
done_testing();
