#!/usr/bin/perl
# wake.pl: the long-poll wake over HTTP, for bench/pop_partitions.sh. ROUNDS
# times: park GET /api/v1/pop/queue/Q?wait=true (autoAck) on a queue with no
# backlog, wait until the listener holds it, push one message to a random
# one of its PARTS partitions, and time the pop's answer from the moment the
# push's answer came. Prints the median and the worst, in ms.
#
#   perl wake.pl PORT QUEUE PARTS ROUNDS
use strict;
use warnings;
use HTTP::Tiny;
use IO::Socket::INET;
use Time::HiRes qw(time sleep);

my ($port, $queue, $parts, $rounds) = @ARGV;
die "usage: wake.pl PORT QUEUE PARTS ROUNDS\n" unless $rounds;
my $ua = HTTP::Tiny->new(timeout => 30, keep_alive => 1);
my @ms;
for my $r (1 .. $rounds)
{
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp')
	  or die "connect: $!";
	print $s "GET /api/v1/pop/queue/$queue?autoAck=true&wait=true&timeout=10000 HTTP/1.1\r\n"
	  . "Host: 127.0.0.1\r\nConnection: close\r\n\r\n";
	sleep 0.3;	# parked by now (a pop of an empty queue takes a few ms)
	my $p = 'p' . (1 + int(rand($parts)));
	my $res = $ua->post("http://127.0.0.1:$port/api/v1/push",
		{ headers => { 'content-type' => 'application/json' },
		  content => qq({"items":[{"queue":"$queue","partition":"$p","payload":{"r":$r}}]}) });
	my $pushed = time;
	die "push answered $res->{status}\n" unless $res->{status} == 201;
	my $buf = '';
	while (sysread($s, my $chunk, 65536)) { $buf .= $chunk; }
	my $answered = time;
	die "pop: no message in $buf\n" unless $buf =~ /"r":$r/;
	push @ms, ($answered - $pushed) * 1000;
	close $s;
}
@ms = sort { $a <=> $b } @ms;
printf "%.1f %.1f\n", $ms[ int($#ms / 2) ], $ms[-1];
