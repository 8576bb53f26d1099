# Helpers for the TAP tests of the HTTP listener: a throwaway cluster with
# queen_streams preloaded on a free HTTP port, and a small HTTP client.
package QsHttp;

use strict;
use warnings;

use Exporter 'import';
use HTTP::Tiny;
use IO::Socket::INET;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Time::HiRes qw(time usleep);

our @EXPORT = qw(qs_node http http_json wait_http json_sql call_sql raw_request
  park_pop read_response parked_pops wait_parked);

my $json = JSON::PP->new->canonical;

# A started cluster with the listener on its own free port, the extension
# created in `postgres`. Extra postgresql.conf lines may be passed.
sub qs_node
{
	my ($name, $conf, %opt) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	my $port = PostgreSQL::Test::Cluster::get_free_port();

	$node->init;
	$node->append_conf('postgresql.conf', <<"EOF");
shared_preload_libraries = 'queen_streams'
queen_streams.http_port = $port
queen_streams.http_workers = 2
log_min_messages = log
EOF
	$node->append_conf('postgresql.conf', $conf) if $conf;
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION queen_streams')
	  unless $opt{no_extension};
	$node->{qs_http_port} = $port;
	# without the extension there is no SQL to ask: any answer will do
	local $node->{qs_no_sql} = 1 if $opt{no_extension};
	wait_http($node);
	return $node;
}

# Until every worker accepts connections (any answer will do).
sub wait_http
{
	my ($node, $timeout) = @_;
	my $deadline = time + ($timeout // $PostgreSQL::Test::Utils::timeout_default);
	while (time < $deadline)
	{
		my $all = $node->safe_psql('postgres',
			"SELECT count(*) FILTER (WHERE listening) = current_setting('queen_streams.http_workers')::int
			   FROM queen_streams.http_workers()")
		  if !$node->{qs_no_sql};
		my ($status) = http($node, 'GET', '/health');
		return 1 if $status != 599 && (!defined $all || $all eq 't');
		usleep(100_000);
	}
	die "HTTP listener did not come up";
}

# One request on a fresh connection: (status, body, headers).
sub http
{
	my ($node, $method, $path, $body, $headers) = @_;
	my $ua = HTTP::Tiny->new(timeout => 30, keep_alive => 0);
	my %opt = (headers => $headers // {});
	if (defined $body)
	{
		$opt{content} = ref $body ? $json->encode($body) : $body;
		$opt{headers}{'content-type'} //= 'application/json';
	}
	my $r = $ua->request($method,
		"http://127.0.0.1:$node->{qs_http_port}$path", \%opt);
	return ($r->{status}, $r->{content}, $r->{headers});
}

# Same, with the body decoded (undef when empty or not JSON).
sub http_json
{
	my ($status, $content, $headers) = http(@_);
	my $doc = eval { $json->decode($content) } if defined $content && length $content;
	return ($status, $doc, $headers, $content);
}

# A SQL expression returning jsonb, decoded.
sub json_sql
{
	my ($node, $sql) = @_;
	return $json->decode($node->safe_psql('postgres', "SELECT ($sql)::text"));
}

# SELECT fn('<doc as JSON>'[, extra SQL args]), decoded.
sub call_sql
{
	my ($node, $fn, $doc, @extra) = @_;
	(my $lit = $json->encode($doc)) =~ s/'/''/g;
	return json_sql($node, join(', ', "$fn('$lit'", @extra) . ')');
}

# Write raw bytes, read until the peer closes or `timeout` seconds pass.
sub raw_request
{
	my ($node, $bytes, $timeout) = @_;
	my $s = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $node->{qs_http_port},
		Proto => 'tcp') or die "connect: $!";
	print $s $bytes;
	my $out = '';
	my $deadline = time + ($timeout // 10);
	$s->blocking(0);
	while (time < $deadline)
	{
		my $n = sysread($s, my $buf, 65536);
		if (defined $n && $n == 0) { last; }
		if (defined $n) { $out .= $buf; next; }
		usleep(20_000);
	}
	close $s;
	return $out;
}

# ---- long-poll pops: a GET left open, its answer read when it comes

# Send `GET $path` on a new connection and return the socket unread.
sub park_pop
{
	my ($node, $path) = @_;
	my $s = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $node->{qs_http_port},
		Proto => 'tcp') or die "connect: $!";
	print $s "GET $path HTTP/1.1\r\nHost: x\r\n\r\n";
	return $s;
}

# Wait for one complete response on `$s`; returns (status, body, seconds
# waited), the status undef when none came within `timeout` seconds.
sub read_response
{
	my ($s, $timeout) = @_;
	my $t0 = time;
	my $buf = '';
	$s->blocking(0);
	while (time - $t0 < $timeout)
	{
		my $n = sysread($s, $buf, 65536, length $buf);
		if (defined $n && $n == 0) { last; }
		if (!defined $n) { usleep(1000); next; }
		if ($buf =~ /^HTTP\/1\.1 (\d+).*?\r\n\r\n(.*)$/s)
		{
			my ($status, $body) = ($1, $2);
			my ($len) = $buf =~ /Content-Length: (\d+)/i;
			return ($status, $body, time - $t0) if length($body) >= ($len // 0);
		}
	}
	return (undef, $buf, time - $t0);
}

# Pops parked in the listener's workers, now.
sub parked_pops
{
	my ($node) = @_;
	return $node->safe_psql('postgres', 'SELECT sum(parked_pops) FROM queen_streams.http_workers()');
}

# Wait (up to 10 s) until `n` pops are parked; returns how many are.
sub wait_parked
{
	my ($node, $n) = @_;
	my $deadline = time + 10;
	usleep(20_000) while parked_pops($node) != $n && time < $deadline;
	return parked_pops($node);
}

1;
