#!/usr/bin/env perl
# META.json against PGXN's META spec 1.0.0 (the rules a release upload is
# checked by) and against the tree: every extension's version is its control
# file's default_version, every file it names exists, the PostgreSQL range
# names the one major we build and test. With a zip (make dist) also checks
# that the archive holds the distribution under name-version/. Prints each
# breach and exits 1; "meta ok" otherwise.
use strict;
use warnings;
use JSON::PP;

my $zip = shift;
my @bad;
sub bad { push @bad, "META.json: @_" }

open my $fh, '<', 'META.json' or die "META.json: $!\n";
my $meta = eval { JSON::PP->new->decode(do { local $/; <$fh> }) };
die "META.json: not JSON: $@" unless $meta;

my $semver = qr/^\d+\.\d+\.\d+(?:[a-zA-Z][0-9a-zA-Z-]*)?$/;
for my $k (qw(name abstract version maintainer license provides meta-spec)) {
	bad("required key \"$k\" is missing") unless exists $meta->{$k};
}
bad("name must be letters, digits, '_' or '-'")
	unless ($meta->{name} // '') =~ /^[A-Za-z0-9_-]{2,}$/;
bad("version \"$meta->{version}\" is not a semantic version")
	unless ($meta->{version} // '') =~ $semver;
bad("meta-spec version must be 1.0.0")
	unless (($meta->{'meta-spec'} // {})->{version} // '') eq '1.0.0';
my %licenses = map { $_ => 1 } qw(agpl_3 apache_1_1 apache_2_0 artistic_1 artistic_2
	bsd gpl_1 gpl_2 gpl_3 lgpl_2_1 lgpl_3_0 mit mozilla_1_0 mozilla_1_1 openssl
	perl_5 postgresql qpl_1_0 ssleay sun zlib open_source restricted unrestricted unknown);
bad("license \"$meta->{license}\" is not one the spec names")
	unless !ref $meta->{license} && $licenses{$meta->{license} // ''};
bad("LICENSE file is missing") unless -f 'LICENSE';
my $status = $meta->{release_status} // 'stable';
bad("release_status \"$status\" must be stable, testing or unstable")
	unless $status =~ /^(stable|testing|unstable)$/;
bad("maintainer must be a string or a non-empty list")
	unless !ref $meta->{maintainer} || (ref $meta->{maintainer} eq 'ARRAY' && @{$meta->{maintainer}});

# every extension of the tree is provided, at its control file's version
my %control;
for my $c (glob '*.control') {
	open my $cf, '<', $c or die "$c: $!\n";
	my ($v) = map { /^default_version\s*=\s*'([^']+)'/ ? $1 : () } <$cf>;
	(my $ext = $c) =~ s/\.control$//;
	$control{$ext} = $v;
}
my $provides = $meta->{provides} // {};
for my $ext (sort keys %control) {
	bad("provides has no \"$ext\" (there is $ext.control)") unless $provides->{$ext};
}
for my $ext (sort keys %$provides) {
	my $p = $provides->{$ext};
	bad("provides.$ext: no control file $ext.control") unless defined $control{$ext};
	for my $k (qw(file version)) {
		bad("provides.$ext: required key \"$k\" is missing") unless defined $p->{$k};
	}
	bad("provides.$ext.version \"$p->{version}\" is not $ext.control's default_version \"$control{$ext}\"")
		if defined $control{$ext} && ($p->{version} // '') ne $control{$ext};
	for my $k (qw(file docfile)) {
		bad("provides.$ext.$k \"$p->{$k}\" does not exist") if defined $p->{$k} && !-f $p->{$k};
	}
}
bad("version \"$meta->{version}\" is not queen_streams.control's \"$control{queen_streams}\"")
	if defined $control{queen_streams} && ($meta->{version} // '') ne $control{queen_streams};

# the PostgreSQL range: the major that is built and tested, and no other
my $pg = ((($meta->{prereqs} // {})->{runtime} // {})->{requires} // {})->{PostgreSQL} // '';
chomp(my $major = `pg_config --version 2>/dev/null` // '');
$major =~ s/^PostgreSQL (\d+).*/$1/;
if ($major =~ /^\d+$/) {
	my $want = ">= $major.0.0, < " . ($major + 1) . ".0.0";
	bad("prereqs.runtime.requires.PostgreSQL is \"$pg\", not \"$want\"") unless $pg eq $want;
}

if (defined $zip) {
	my $prefix = "$meta->{name}-$meta->{version}/";
	my @names = `unzip -Z1 "$zip"`;
	chomp @names;
	push @bad, "$zip: cannot be listed (unzip -Z1)" unless @names;
	my %in = map { $_ => 1 } @names;
	for my $f (qw(META.json LICENSE README.md Makefile), map { "$_.control" } sort keys %control) {
		push @bad, "$zip: has no $prefix$f" unless $in{"$prefix$f"};
	}
	my @outside = grep { index($_, $prefix) != 0 } @names;
	push @bad, "$zip: \"$outside[0]\" is outside $prefix" if @outside;
	my @built = grep { m{^\Q$prefix\E.*\.(o|so|bc)$} } @names;
	push @bad, "$zip: holds a build product, $built[0]" if @built;
}

if (@bad) { print "$_\n" for @bad; exit 1 }
print "meta ok\n";
