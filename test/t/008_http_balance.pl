# Connections are spread evenly over the workers. The kernel's SO_REUSEPORT
# hash alone often puts several keep-alive connections on one worker while
# another has none, and a worker serves one request at a time; a worker that
# accepts a connection while another holds fewer hands it over.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use IO::Socket::INET;
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = qs_node('balance');
my $port = $node->{qs_http_port};

sub open_connections
{
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	while (time < $deadline)
	{
		return if $node->safe_psql('postgres',
			'SELECT sum(connections) FROM queen_streams.http_workers()') == 0;
		usleep(50_000);
	}
	die 'connections of earlier requests are still open';
}

# GET /health on a keep-alive socket: the index of the worker that answered.
sub served_by
{
	my ($s) = @_;
	print $s "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
	my $buf = '';
	while ($buf !~ /\r\n\r\n/)
	{
		my $n = sysread($s, $buf, 4096, length $buf);
		return undef unless $n;
	}
	my ($head, $rest) = split /\r\n\r\n/, $buf, 2;
	my ($len) = $head =~ /Content-Length: (\d+)/i;
	while (length($rest) < ($len // 0))
	{
		my $n = sysread($s, $rest, 4096, length $rest);
		last unless $n;
	}
	return undef unless $head =~ m{^HTTP/1\.1 200};
	return decode_json($rest)->{worker};
}

sub spread
{
	my ($n) = @_;
	my (@socks, %per_worker);
	open_connections();
	for (1 .. $n)
	{
		my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp')
		  or die "connect: $!";
		$s->autoflush(1);
		my $w = served_by($s) // 'none';
		push @socks, [ $s, $w ];
		$per_worker{$w}++;
	}
	# each connection stays with its worker and keeps serving
	my $same = grep { (served_by($_->[0]) // '') eq $_->[1] } @socks;
	close $_->[0] for @socks;
	return (join(',', map { $per_worker{$_} // 0 } 0, 1, 'none'), $same);
}

# a few rounds: the hash alone gets one of them right now and then
for my $round (1 .. 3)
{
	my ($spread, $served) = spread(8);
	is($spread, '4,4,0', "round $round: eight keep-alive connections, four on each worker");
	is($served, 8, "round $round: each serves its next request on the same worker");

	($spread, $served) = spread(5);
	like($spread, qr/^(2,3|3,2),0$/, "round $round: five, three and two");
}

is($node->safe_psql('postgres', 'SELECT count(*) FROM queen_streams.http_workers() WHERE listening'),
	'2', 'both workers still listening');

done_testing();
