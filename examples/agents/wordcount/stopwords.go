package main

// stopWords are common English words left out of top_terms.
var stopWords = setOf(`a about above after again against all also am an and any are aren't as at
be because been before being below between both but by can can't cannot could couldn't did didn't
do does doesn't doing don't down during each else etc few for from further get got had hadn't has
hasn't have haven't having he he'd he'll he's her here here's hers herself him himself his how
how's however i i'd i'll i'm i've if in into is isn't it it's its itself just let's like may me
might more most must mustn't my myself no nor not now of off on once one only or other ought our
ours ourselves out over own same shall shan't she she'd she'll she's should shouldn't so some such
than that that's the their theirs them themselves then there there's these they they'd they'll
they're they've this those through to too two under until up upon us use used using very via was
wasn't we we'd we'll we're we've were weren't what what's when when's where where's whether which
while who who's whom why why's will with within without won't would wouldn't yet you you'd you'll
you're you've your yours yourself yourselves`)

func setOf(words string) map[string]bool {
	set := map[string]bool{}
	word := []rune{}
	for _, r := range words + " " {
		if r == ' ' || r == '\n' || r == '\t' {
			if len(word) > 0 {
				set[string(word)] = true
				word = word[:0]
			}
			continue
		}
		word = append(word, r)
	}
	return set
}
