#!/usr/bin/perl
# pop_drain.pl: Queen's client shape over HTTP, for bench/pop_partitions.sh:
# C keep-alive connections (one forked process each), each popping one
# message at a time (GET /api/v1/pop/queue/Q?batch=1, no wait) and acking it
# (POST /api/v1/ack), until the queue answers 204 three times in a row to a
# connection or `seconds` pass. Prints: messages acked, seconds from the
# first request to the last answer, and acked messages per second.
#
# Each connection writes a request in one write on a socket with
# TCP_NODELAY, as Node's HTTP client (Queen's official one) does. HTTP::Tiny
# writes a POST's head and body in two writes without TCP_NODELAY: Nagle's
# algorithm then holds the body until the server's delayed ACK of the head
# (up to 40 ms on Linux), and that, not the server, bounded an earlier
# version of this script at 60-190 msgs/s whatever the partition count.
#
#   perl pop_drain.pl PORT QUEUE CONNS SECONDS [GROUP]
use strict;
use warnings;
use IO::Socket::INET;
use Socket qw(IPPROTO_TCP TCP_NODELAY);
use JSON::PP;
use POSIX ();
use Time::HiRes qw(time);

my ($port, $queue, $conns, $seconds, $group) = @ARGV;
die "usage: pop_drain.pl PORT QUEUE CONNS SECONDS [GROUP]\n" unless $seconds;
my $json = JSON::PP->new->utf8;
my $q = "/api/v1/pop/queue/$queue?batch=1" . ($group ? "&consumerGroup=$group" : '');
pipe(my $rd, my $wr) or die "pipe: $!";
my $start = time;
my $stop_at = $start + $seconds;
my @kids;
for my $k (1 .. $conns)
{
	my $pid = fork // die "fork: $!";
	if ($pid == 0)
	{
		close $rd;
		my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port)
		  or die "connect: $!\n";
		setsockopt($sock, IPPROTO_TCP, TCP_NODELAY, 1);
		my $buf = '';
		# one request in one write; the answer's status and body
		my $call = sub {
			my ($method, $path, $body) = @_;
			my $req = "$method $path HTTP/1.1\r\nHost: 127.0.0.1\r\n";
			$req .= "Content-Type: application/json\r\nContent-Length: " . length($body) . "\r\n"
			  if defined $body;
			syswrite($sock, $req . "\r\n" . ($body // '')) or die "write: $!\n";
			until ($buf =~ /\r\n\r\n/)
			{
				sysread($sock, $buf, 65536, length $buf) or die "read: connection closed\n";
			}
			my ($head, $rest) = split /\r\n\r\n/, $buf, 2;
			my ($st) = $head =~ /^HTTP\/1\.1 (\d+)/ or die "bad answer: $head\n";
			my $len = $head =~ /^content-length:\s*(\d+)/mi ? $1 : 0;
			while (length($rest) < $len)
			{
				sysread($sock, $rest, 65536, length $rest) or die "read: connection closed\n";
			}
			$buf = substr($rest, $len);
			return { status => $st, content => substr($rest, 0, $len) };
		};
		my ($acked, $empty, $last) = (0, 0, time);
		while ($empty < 3 && time < $stop_at)
		{
			my $r = $call->('GET', $q);
			$last = time;
			if ($r->{status} == 204) { $empty++; next; }
			die "pop answered $r->{status}: $r->{content}\n" unless $r->{status} == 200;
			$empty = 0;
			my $d = $json->decode($r->{content});
			for my $m (@{ $d->{messages} })
			{
				my $a = $call->('POST', '/api/v1/ack', $json->encode({ transactionId => $m->{transactionId},
						partitionId => $m->{partitionId}, leaseId => $m->{leaseId},
						$group ? (consumerGroup => $group) : () }));
				$last = time;
				$acked++ if $a->{status} == 200;
			}
		}
		print $wr "$acked $last\n";
		close $wr;
		POSIX::_exit(0);
	}
	push @kids, $pid;
}
close $wr;
my ($acked, $last) = (0, $start);
while (my $l = <$rd>)
{
	my ($n, $t) = split ' ', $l;
	$acked += $n;
	$last = $t if $t > $last;
}
waitpid($_, 0) for @kids;
my $secs = $last - $start;
printf "%d %.2f %.0f\n", $acked, $secs, $secs > 0 ? $acked / $secs : 0;
