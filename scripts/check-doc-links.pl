#!/usr/bin/env perl
# Every relative link of the project's pages (README.md, CONTRIBUTING.md,
# doc/*.md, bench/README.md) names a file that exists and, after '#', a
# heading of that page (GitHub's anchors: lower case, punctuation dropped,
# spaces as '-'). Prints each broken link and exits 1; "links ok" otherwise.
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Spec;

my @pages = ('README.md', 'CONTRIBUTING.md', 'bench/README.md', sort glob('doc/*.md'));
my %anchors;

sub read_page {
	my ($path) = @_;
	open my $fh, '<', $path or return undef;
	local $/;
	return <$fh>;
}

sub anchors_of {
	my ($path) = @_;
	return $anchors{$path} if $anchors{$path};
	my $text = read_page($path) // '';
	$text =~ s/^```.*?^```//gms;	# headings inside code blocks are not headings
	my %a;
	for my $h ($text =~ /^#+ (.*)$/mg) {
		my $id = lc $h;
		$id =~ s/[^\w\- ]//g;
		$id =~ s/ /-/g;
		$a{$id} = 1;
	}
	return $anchors{$path} = \%a;
}

my $bad = 0;
for my $page (@pages) {
	my $text = read_page($page) // next;
	$text =~ s/^```.*?^```//gms;
	while ($text =~ /\]\(([^)\s]+)\)/g) {
		my $link = $1;
		next if $link =~ m{^[a-z]+:}i;
		my ($file, $frag) = split /#/, $link, 2;
		my $target = $file eq '' ? $page : File::Spec->canonpath(dirname($page) . "/$file");
		$target =~ s{^\./}{};
		if ($file ne '' && !-e $target) {
			print "$page: $link: no such file\n";
			$bad++;
			next;
		}
		if (defined $frag && $target =~ /\.md$/ && !anchors_of($target)->{$frag}) {
			print "$page: $link: no such heading in $target\n";
			$bad++;
		}
	}
}
exit 1 if $bad;
print "links ok\n";
