"""The built-in offline summariser, used when no Utility model is set.

`summarise` turns a block of messages into a `Draft` without any model: the heading names the
speakers, the scene and the dates; the facts are the block's most informative sentences (rare
terms weighted by idf — the chat's own when given —, names and numbers favoured, terms the chat
says here for the first time favoured, small talk dropped), kept in the order they were said and
with what they depend on: a sentence opening with a pronoun or "that"/"so" keeps the one before
it, a question keeps its answer and an answer its question, and direct speech is kept whole. The
keywords are the block's distinctive names, places and objects: proper nouns, quantities and
nouns rare in the chat, never common words. `roll_up` merges several drafts into a broader one
that keeps something from each part, its keywords the children's.

Pure and defensive: standard library only, no I/O, and odd input (empty, emoji, a huge message,
scripts without spaces or capitals) gives a usable draft rather than an exception.
"""

from __future__ import annotations

import datetime
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from memory.drafts import MAX_FACT, MAX_FACTS, MAX_KEYWORDS, MONTHS, Draft, Line, clip, shorten, when_label

__all__ = [
    "EMPTY_HEADING",
    "ChatStats",
    "heading_parts",
    "idf_table",
    "proper_names",
    "roll_up",
    "split_sentences",
    "summarise",
    "terms",
]

EMPTY_HEADING = "(nothing said)"
NO_SPEAKERS = "Unnamed speakers"
MAX_SPEAKERS_NAMED = 5  # beyond this the heading says "and N others"
MAX_MESSAGE = 20_000  # characters of one message that are read
MAX_NAME = 40  # characters of a speaker's name kept in headings and fact prefixes

STOPWORDS = frozenset(
    """
    a about above after again against all almost along already also although always am among an and
    another any anybody anyone anything anyway anywhere are aren't around as at away back be because
    been before behind being below beside besides between both but by can can't cannot could couldn't
    did didn't do does doesn't doing don't done down during each either else enough even ever every
    everybody everyone everything everywhere few for from further get gets getting got gotten had hadn't
    has hasn't have haven't having he he'd he'll he's her here here's hers herself him himself his how
    how's however i i'd i'll i'm i've if in indeed instead into is isn't it it'd it'll it's its itself
    just least less let let's like likely made make makes making many may maybe me might mine more most
    much must mustn't my myself near neither never nevertheless next no nobody none nor not nothing now
    nowhere of off often oh on once one ones only onto or other others otherwise ought our ours
    ourselves out over own perhaps quite rather really same shall shan't she she'd she'll she's should
    shouldn't since so some somebody someone something sometimes somewhat somewhere soon still such
    than that that's the their theirs them themselves then there there's these they they'd they'll
    they're they've thing things this those though through thus to too toward towards under until up
    upon us very via was wasn't we we'd we'll we're we've were weren't what what's whatever when when's
    whenever where where's whereas wherever whether which while who who's whoever whom whose why why's
    will with within without won't would wouldn't yet you you'd you'll you're you've your yours
    yourself yourselves today tonight tomorrow yesterday
    """.split()
)

# Words that make a sentence chit-chat when they are all it has besides stopwords.
SMALL_TALK = frozenset(
    """
    hi hello hey hiya howdy greetings thanks thank thx ty ok okay okey alright fine sure yeah yep yup
    yes nope nah hmm hm mm mhm uh um uhh umm ah ahh aha oh ooh wow whoa huh heh haha hahaha lol lmao
    bye goodbye goodnight night morning evening afternoon good great nice cool awesome welcome sorry
    please pleased meet see seeing glad well right anyway again lovely wonderful indeed true agreed
    course totally absolutely definitely exactly guess suppose feel know think mean say said says
    going go come coming doing done day time care lot bit kind sort
    """.split()
)

# Common verbs and adjectives: they help score a sentence but make poor keywords.
NOT_KEYWORDS = frozenset(
    """
    said says say tell told ask asked asks look looks looked looking see saw seen seem seems seemed
    want wants wanted need needs needed get got take takes took taken give gives gave given keep
    keeps kept put puts find finds found try tries tried turn turns turned walk walks walked smile
    smiles smiled nod nods nodded laugh laughs laughed sigh sighs sighed reply replies replied
    answer answers answered think thinks thought know knows knew feel feels felt start started
    let lets hold holds held bring brings brought leave leaves left stay stays stayed move moves
    moved sure little big small long short old new first last good bad great best better worse
    whole same different own real okay right wrong hard easy quick quickly slowly softly gently
    quietly voice eyes hand hands head face back side way moment while place room two three four
    five six seven eight nine ten eleven twelve second third fourth fifth once twice came come comes
    went go goes gone going make made makes become became becomes run ran runs sit sat sits stand
    stood stands open opened close closed call called use used begin began begins
    """.split()
)

MONTH_NAMES = "january february march april may june july august september october november december".split()
WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday".split())
# Calendar words are capitalised but are not names.
NOT_NAMES = WEEKDAYS | frozenset(MONTH_NAMES) | frozenset(month.lower() for month in MONTHS)

ABBREVIATIONS = frozenset(
    "mr mrs ms mx dr st prof sr jr mt capt col gen lt sgt rev hon vs etc e.g i.e approx dept est fig".split()
)

DETERMINERS = frozenset("a an the his her my your our their its this that these those every each".split())

PLACE_NOUNS = frozenset(
    """
    harbour harbor port cove bay beach coast island isle lighthouse inn tavern pub bar cafe café
    hotel street road lane avenue square market bridge gate wall castle keep tower fort fortress
    palace manor hall house temple church chapel abbey cathedral shrine academy school library
    station hospital mill farm village town city district quarter forest woods wood lake river
    sea ocean mountain mountains hills valley cave caves mine desert marsh swamp garden gardens park
    grove ruins dungeon camp outpost docks pier
    """.split()
)
# A capitalised phrase after these is a place; "at"/"to"/"from" need "the" too ("at the Anchor"),
# because on their own they are as often followed by a person ("glances at Tobin").
PLACE_PREPOSITIONS = frozenset("in inside into within near outside across through beyond".split())
PLACE_PREPOSITIONS_WITH_THE = frozenset("at to from toward towards around behind".split())

# Each word with the text before it, which tells whether it opens a sentence or continues a name.
_WORD_RE = re.compile(r"(\W*)(\w+(?:['’]\w+)*)")
_CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_OOC_RE = re.compile(r"\(\([^)]*\)\)|[(\[]\s*OOC\b[^)\]]*[)\]]", re.IGNORECASE)
# Asterisks wrap *actions*, so where one opens or closes a sentence ends; so does a line break.
_SEGMENT_RE = re.compile(r"[*`]+|\n\s*|__+|~~|(?m:^)#+ ")
_CLOSERS = "\"'”’»)]」』"
_END_RE = re.compile(
    r"[.!?…。！？]+[" + re.escape(_CLOSERS) + r"]*(?=\s|$)|[。！？]+[" + re.escape(_CLOSERS) + r"]*"
)
_NEXT_CHAR_RE = re.compile(r"\s*[\"'“‘«(\[]*(\S)")
_OPENERS = frozenset("\"'“‘«([:—–-")
_SPACE_RE = re.compile(r"\s+")
_NAMED_RE = re.compile(r"(?:^|(?<=\s))(['‘\"“])(\w[\w'-]*(?: \w[\w'-]*)?)['’\"”](?=[\s.,;:!?]|$)")
_SPEECH_RE = re.compile(r'"[^"\n]+"|“[^”\n]+”')
_QUANTITY_RE = re.compile(
    r"\b\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:" + "|".join(MONTH_NAMES) + r")\b"
    r"|\b(?:" + "|".join(MONTH_NAMES) + r")\s+\d{1,2}(?:st|nd|rd|th)?\b"
    r"|\b\d+(?:[.,:]\d+)*(?:\s?(?:%|°[CF]?|[^\W\d_]+(?:['’][^\W\d_]+)?))?",
    re.IGNORECASE,
)
_DIGIT_RE = re.compile(r"\d")
_ALNUM_RE = re.compile(r"[^\W_]")
_YEAR_OR_TIME_RE = re.compile(r"^(?:1[0-9]{3}|2[0-9]{3}|\d{1,2}:\d{2})$")
_MONTH_INDEX = {name.lower(): number for number, name in enumerate(MONTHS, start=1)}
_DATE_RANGE_RE = re.compile(
    r"(?P<d1>\d{1,2})(?:\s(?P<m1>[A-Z][a-z]{2}))?(?:\s(?P<y1>\d{4}))?\s?[–-]\s?"
    r"(?P<d2>\d{1,2})\s(?P<m2>[A-Z][a-z]{2})\s(?P<y2>\d{4})"
)
_DATE_RE = re.compile(r"\b(?P<d>\d{1,2})\s(?P<m>[A-Z][a-z]{2})\s(?P<y>\d{4})\b")
_POV_RE = re.compile(r"^As (?P<pov>.{1,60}?) saw it:\s*")
_OTHERS_RE = re.compile(r"^\d+ others?$")

# Score weights, tuned by hand on roleplay transcripts.
NAME_BONUS = 0.75  # per name or quantity in a sentence, up to MAX_BONUS_ITEMS of them
MAX_BONUS_ITEMS = 3
QUESTION_FACTOR = 0.8  # a question rarely states a fact
REDUNDANT = 0.6  # term overlap (Jaccard) above which a second sentence adds little
FACT_TERM_BONUS = 1.0  # keywords should point at the facts that were kept
KEYWORD_NAME_BONUS = 1.5  # a name is what a scene is most often recalled by
SPEAKER_FACTOR = 0.5  # speakers are in the heading already, so they are the least distinctive names
NOVEL_BONUS = 0.5  # per term the chat says here for the first time, up to MAX_BONUS_ITEMS of them
COMMON_SHARE = 0.02  # a noun in more than this share of the chat's messages is no keyword
MIN_CHAT = 50  # messages the chat's own statistics need before they decide what is common
# Prepositions the stopword list does not hold: a noun phrase ends before them ("the vault beneath").
PHRASE_BREAKS = frozenset(
    "beneath underneath beyond atop amid amidst despite except past across along inside outside".split()
)
# A sentence opening with one of these leans on the one before it ("It was the priest who took it").
# Not "he", "she", "they": in roleplay narration they are mostly the speaker ("*She smiles.*").
DEPENDENT_OPENERS = frozenset(
    "it its it's this that these those there then so which yes no yeah nope".split()
)


@dataclass(slots=True)
class _Sentence:
    order: int
    speaker: str
    text: str
    terms: list[str]
    names: list[str] = field(default_factory=list)  # display forms, in order
    places: list[str] = field(default_factory=list)
    quantities: list[str] = field(default_factory=list)
    weight: int = 0  # content size: terms, with scripts written without spaces counted by length
    score: float = 0.0
    nounish: set[str] = field(default_factory=set)


def _clean_sentence(text: str) -> str:
    if "  " in text or "\n" in text or "\t" in text or "\r" in text:
        text = _SPACE_RE.sub(" ", text)
    text = text.strip().strip('"“”«»„ ')
    # A quote cut in half by the split reads better without its lone mark.
    if text.count('"') % 2:
        text = text.replace('"', "")
    if text.count("“") != text.count("”"):
        text = text.replace("“", "").replace("”", "")
    return text.strip()


def _is_boundary(segment: str, match: re.Match[str]) -> bool:
    # Positions, not slices: a slice per boundary would make a long message quadratic.
    following = _NEXT_CHAR_RE.match(segment, match.end())
    if following and following.group(1).islower():
        return False  # "Well... maybe", "e.g. this": the sentence goes on
    if match.group().rstrip(_CLOSERS) != ".":
        return True
    space = max(segment.rfind(" ", 0, match.start()), segment.rfind("\t", 0, match.start()))
    word = segment[space + 1 : match.start()].lstrip("\"'“‘([")
    if word.casefold() in ABBREVIATIONS:
        return False
    return not (len(word) == 1 and word.isupper())  # an initial, as in "J. Smith"


def _speech(segment: str) -> list[tuple[int, int]]:
    """The spans of direct speech short enough to keep whole (one fact's length at most)."""
    return [(m.start(), m.end()) for m in _SPEECH_RE.finditer(segment) if m.end() - m.start() <= MAX_FACT]


def split_sentences(text: str) -> list[str]:
    """Split a message into sentences, treating *actions* and line breaks as their own sentences.

    Direct speech ("…" or “…”) up to a fact's length stays one sentence, whatever it holds."""
    if not isinstance(text, str):
        return []
    sentences = []
    for segment in _SEGMENT_RE.split(_OOC_RE.sub(" ", text)):
        start = 0
        speech = _speech(segment) if '"' in segment or "“" in segment else []
        for match in _END_RE.finditer(segment):
            if any(a < match.end() < b for a, b in speech):
                continue  # inside a short quoted speech: it is kept whole
            if _is_boundary(segment, match):
                sentences.append(segment[start : match.end()])
                start = match.end()
        sentences.append(segment[start:])
    cleaned = (_clean_sentence(sentence) for sentence in sentences)
    return [sentence for sentence in cleaned if _ALNUM_RE.search(sentence)]


def _term(word: str) -> str:
    term = word.strip("_").casefold().replace("’", "'")
    if term.endswith("'s"):
        term = term[:-2]
    return term


def _is_content(term: str) -> bool:
    if len(term) < 2 or term[0].isdigit() or term in STOPWORDS or term in SMALL_TALK:
        return False
    # Without a stopword list for every language, short words are mostly particles ("не", "من").
    return len(term) >= 3 or bool(_CJK_RE.search(term))


@dataclass(frozen=True, slots=True)
class _Word:
    term: str
    content: bool
    units: int  # scripts without spaces come out of the tokenizer as one long "word" per clause
    name_like: bool  # capitalised, and not a title, a stopword or a calendar word
    bare: str  # the surface without a possessive "'s"
    possessive: bool
    determiner: bool


_WORDS: dict[str, _Word] = {}
_WORDS_LIMIT = 50_000


def _word(surface: str) -> _Word:
    # Tokens repeat a great deal across messages, so their analysis is cached (and bounded).
    found = _WORDS.get(surface)
    if found is not None:
        return found
    term = _term(surface)
    word = surface.strip("_")  # markdown _italics_
    possessive = word.endswith(("'s", "’s"))
    capitalised = word[:1].isupper() and not (len(word) > 4 and word.isupper())
    found = _Word(
        term=term,
        content=_is_content(term),
        units=max(1, len(term) // 2) if _CJK_RE.search(term) else 1,
        name_like=capitalised
        and term not in STOPWORDS
        and term not in NOT_NAMES
        and term not in SMALL_TALK
        and term not in ABBREVIATIONS,
        bare=word[:-2] if possessive else word,
        possessive=possessive,
        determiner=term in DETERMINERS,
    )
    if len(_WORDS) >= _WORDS_LIMIT:
        _WORDS.clear()
    _WORDS[surface] = found
    return found


def terms(text: str) -> list[str]:
    """Return the content terms of a text, casefolded, in order, repeats kept (the keys of an idf table)."""
    if not isinstance(text, str):
        return []
    return [term for _, word in _WORD_RE.findall(text) if _is_content(term := _term(word))]


def idf_table(documents: Iterable[str]) -> dict[str, float]:
    """Return an idf for every content term of the documents, in the form `summarise` accepts."""
    frequency: Counter[str] = Counter()
    count = 0
    for document in documents:
        count += 1
        frequency.update(set(terms(document)))
    return {term: math.log((count + 1) / (df + 0.5)) for term, df in frequency.items()}


def _analyse(text: str, order: int, speaker: str, speakers: frozenset[str]) -> _Sentence:
    cached = _WORDS.get
    pairs = _WORD_RE.findall(text)
    words = [cached(surface) or _word(surface) for _, surface in pairs]
    content = []
    nounish = set()
    weight = 0
    # After "the", "a", "his"... (maybe with one word between) a term is probably a noun.
    # The last content word of a run after "the", "a", "his"... is its head noun ("a sharp knife":
    # knife, not sharp).
    phrase: list[str] = []
    in_phrase = False
    for word in words:
        if word.content:
            content.append(word.term)
            if word.term not in speakers:
                weight += word.units
            if in_phrase and not word.name_like and not _breaks_phrase(word.term):
                phrase.append(word.term)
                if len(phrase) == 3:
                    nounish.add(phrase[-1])
                    phrase, in_phrase = [], False
                continue
        if phrase:
            nounish.add(phrase[-1])
        phrase = []
        in_phrase = word.determiner
    if phrase:
        nounish.add(phrase[-1])
    sentence = _Sentence(order=order, speaker=speaker, text=text, terms=content, weight=weight)
    sentence.nounish = nounish
    # Every quantity and date the pattern knows has a digit in it.
    sentence.quantities = _quantities(text) if _DIGIT_RE.search(text) else []
    # Runs of capitalised words: [(words, starts the sentence, index of first word)].
    runs: list[tuple[list[str], bool, int]] = []
    for index, word in enumerate(words):
        if not word.name_like:
            continue
        gap = pairs[index][0]
        joined = (
            runs
            and runs[-1][2] + len(runs[-1][0]) == index
            and gap == " "
            and not words[index - 1].possessive
        )
        if joined:
            runs[-1][0].append(word.bare)
        else:
            # Opening the sentence, or a quote or a clause after a colon or dash: maybe not a name.
            opening = index == 0 or gap.rstrip()[-1:] in _OPENERS
            runs.append(([word.bare], opening, index))
    # A word or two set in quotes ("the password is 'gannet'") names a thing, capitalised or not.
    for match in _NAMED_RE.finditer(text):
        named = match.group(2)
        if len(named.split()) <= 2 and _is_content(_term(named.split()[-1])):
            sentence.names.append(named)
    for run, initial, first in runs:
        phrase = " ".join(run)
        sentence.names.append("\0" + phrase if initial else phrase)  # initial ones are resolved later
        if _place_like(words, run, first):
            sentence.places.append(phrase)
    return sentence


def _breaks_phrase(term: str) -> bool:
    """A word that cannot be inside a noun phrase: a preposition, an adverb."""
    return term in PHRASE_BREAKS or (term.endswith("ly") and len(term) > 4)


def _place_like(words: list[_Word], run: list[str], first: int) -> bool:
    last = words[first + len(run) - 1]
    if last.possessive:
        return False  # "in Tobin's house": the place is the house, not Tobin
    if last.term in PLACE_NOUNS and (len(run) > 1 or first > 0):
        return True
    before = [word.term for word in words[max(0, first - 2) : first]]
    if before and before[-1] in PLACE_PREPOSITIONS:
        return True
    return (
        len(before) == 2
        and before[1] == "the"
        and (before[0] in PLACE_PREPOSITIONS or before[0] in PLACE_PREPOSITIONS_WITH_THE)
    )


def _quantities(text: str) -> list[str]:
    found = []
    for match in _QUANTITY_RE.finditer(text):
        quantity = match.group().strip()
        parts = quantity.split()
        if parts[0][:1].isdigit() and len(parts) == 2 and _term(parts[1]) in STOPWORDS:
            quantity = parts[0]  # "3 of them": the number alone
        if any(char.isalpha() for char in quantity) or _YEAR_OR_TIME_RE.match(quantity):
            found.append(quantity)
    return found


def _resolve_names(sentences: list[_Sentence], speakers: Iterable[str]) -> None:
    # A capitalised word that opens a sentence is a name only if it is known as one elsewhere
    # (or is part of a longer capitalised phrase, such as "Rusty Anchor is busy").
    known = {name.casefold() for name in speakers}
    for sentence in sentences:
        known.update(_term(name) for name in sentence.names if not name.startswith("\0"))
    for sentence in sentences:
        resolved = []
        for name in sentence.names:
            if name.startswith("\0"):
                name = name[1:]
                if " " not in name and _term(name) not in known:
                    continue
            resolved.append(name)
        sentence.names = resolved


def _speaker_name(speaker: object) -> str:
    return shorten(speaker, MAX_NAME) if isinstance(speaker, str) else ""


def _join_names(names: Sequence[str]) -> str:
    if len(names) > MAX_SPEAKERS_NAMED:
        shown = list(names[: MAX_SPEAKERS_NAMED - 1])
        rest = len(names) - len(shown)
        return ", ".join(shown) + f" and {rest} others"
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def _heading(who: Sequence[str], settings: Sequence[str], when: str, pov: str | None) -> str:
    parts = [_join_names(who) or NO_SPEAKERS]
    if settings:
        parts.append(" → ".join(settings))
    if when:
        parts.append(when)
    heading = " — ".join(parts)
    return f"As {pov} saw it: {heading}" if pov else heading


def _score(unique: set[str], idf: Mapping[str, float] | ChatStats, default: float, bonus_items: int) -> float:
    if not unique:
        return 0.0
    # Sum over terms, damped by sqrt(length) so a long sentence is not favoured for length alone.
    base = sum(idf.get(term, default) for term in unique) / math.sqrt(len(unique))
    return base + NAME_BONUS * min(MAX_BONUS_ITEMS, bonus_items)


def _pick(
    candidates: list[tuple[float, int, set[str]]], limit: int, chosen: list[int] | None = None
) -> list[int]:
    """Return up to `limit` candidate indexes, best score first, skipping near-repeats."""
    picked = list(chosen or [])
    picked_terms = [candidates[index][2] for index in picked]
    ranked = sorted(range(len(candidates)), key=lambda index: (-candidates[index][0], index))
    for index in ranked:
        if len(picked) >= limit:
            break
        if index in picked:
            continue
        mine = candidates[index][2]
        if any(mine and len(mine & other) / len(mine | other) >= REDUNDANT for other in picked_terms):
            continue
        picked.append(index)
        picked_terms.append(mine)
    return picked


def _local_idf(documents: Sequence[Iterable[str]]) -> dict[str, float]:
    frequency: Counter[str] = Counter()
    for document in documents:
        frequency.update(set(document))
    return {term: math.log((len(documents) + 1) / (df + 0.5)) for term, df in frequency.items()}


def _usable_idf(idf: object) -> dict[str, float]:
    if not isinstance(idf, Mapping):
        return {}
    table = {}
    for term, value in idf.items():
        if isinstance(term, str) and isinstance(value, int | float) and math.isfinite(value):
            table[term] = float(value)
    return table


class ChatStats:
    """A chat's own term statistics over its messages: how many say each term, and where it was
    first said. Fed message by message (`add`), in any order."""

    def __init__(self) -> None:
        self.messages = 0
        self.df: Counter[str] = Counter()
        self.first_seen: dict[str, int] = {}

    def add(self, seq: int, text: str) -> None:
        self.messages += 1
        for term in set(terms(text[:MAX_MESSAGE] if isinstance(text, str) else "")):
            self.df[term] += 1
            if seq < self.first_seen.get(term, seq + 1):
                self.first_seen[term] = seq

    def get(self, term: str, default: float) -> float:
        """The term's idf over the chat's messages (`default` for a term it never said)."""
        df = self.df.get(term)
        return math.log((self.messages + 1) / (df + 0.5)) if df else default

    @property
    def rare(self) -> float:
        return math.log((self.messages + 1) / 0.5)

    def common(self, term: str) -> bool:
        """Said in too many of the chat's messages to set a stretch apart (once the chat is long enough)."""
        return self.messages >= MIN_CHAT and self.df.get(term, 0) > COMMON_SHARE * self.messages

    def novel(self, term: str, start: int) -> bool:
        """First said at message `start` or later."""
        return self.first_seen.get(term, start) >= start


def summarise(
    lines: list[Line],
    *,
    setting: str = "",
    pov: str | None = None,
    idf: dict[str, float] | None = None,
    stats: ChatStats | None = None,
) -> Draft:
    """Summarise a block of messages without a model.

    `setting` is a short place or scene to name in the heading (else the most mentioned
    capitalised place, else none); `pov` makes the heading say whose memory this is; `stats`
    are the chat's own statistics (rarity, first mentions, common words), else `idf` maps
    casefolded terms (as `terms` gives them) to their idf over a wider corpus, else the block's
    own sentences are the corpus.
    """
    lines = [line for line in (lines or ()) if isinstance(line, Line)]
    pov = _speaker_name(pov) or None
    speakers: list[str] = []
    for line in lines:
        name = _speaker_name(line.speaker)
        if name and name.casefold() not in {speaker.casefold() for speaker in speakers}:
            speakers.append(name)
    speaker_terms = frozenset(_term(word) for name in speakers for _, word in _WORD_RE.findall(name))

    sentences: list[_Sentence] = []
    for line in lines:
        message = line.text if isinstance(line.text, str) else ""
        speaker = _speaker_name(line.speaker)
        # A pasted chapter should not stall the worker; its opening is summary enough.
        for text in split_sentences(message[:MAX_MESSAGE]):
            sentences.append(_analyse(text, len(sentences), speaker, speaker_terms))
    _resolve_names(sentences, speakers)

    when = when_label([line.when for line in lines])
    if isinstance(setting, str) and setting.strip():
        settings = [shorten(setting, MAX_FACT // 3)]
    else:
        settings = _main_place(sentences, speakers, pov)
    if not sentences:
        heading = _heading(speakers, settings, when, pov) if speakers else EMPTY_HEADING
        if not speakers and when:
            heading += f" — {when}"
        return clip(Draft(heading=heading, keywords=list(speakers)))

    start = min((line.seq for line in lines), default=0)
    novel: set[str] = set()
    common: frozenset[str] = frozenset()
    if stats is not None and stats.messages:
        table: Mapping[str, float] | ChatStats = stats
        default = stats.rare
        said = {term for sentence in sentences for term in sentence.terms}
        novel = {term for term in said if stats.novel(term, start)}
        common = frozenset(term for term in said if stats.common(term))
    else:
        table = _usable_idf(idf) or _local_idf([sentence.terms for sentence in sentences])
        default = max(table.values(), default=1.0)

    candidates: list[tuple[float, int, set[str]]] = []
    for index, sentence in enumerate(sentences):
        unique = set(sentence.terms)
        if sentence.weight < 2:
            continue  # greetings, thanks, "Hmm.", a bare action: nothing to remember
        score = _score(unique, table, default, len(set(sentence.names)) + len(sentence.quantities))
        score += NOVEL_BONUS * min(MAX_BONUS_ITEMS, len(unique & novel))
        if sentence.text.rstrip(_CLOSERS).endswith("?"):
            score *= QUESTION_FACTOR
        if len(sentence.text) > MAX_FACT:
            score *= MAX_FACT / len(sentence.text)
        sentence.score = score
        candidates.append((score, index, unique))
    picked = sorted(candidates[index][1] for index in _pick(candidates, MAX_FACTS))
    groups = _with_dependencies(sentences, picked)
    facts = [_facts(sentences, group) for group in groups]
    kept = [sentences[index] for group in groups for index in group]
    keywords = _keywords(sentences, table, default, kept, speakers, common)
    return clip(Draft(heading=_heading(speakers, settings, when, pov), facts=facts, keywords=keywords))


def _fact(sentence: _Sentence) -> str:
    return f"{sentence.speaker}: {sentence.text}" if sentence.speaker else sentence.text


def _is_question(sentence: _Sentence) -> bool:
    return sentence.text.rstrip(_CLOSERS).endswith("?")


def _leans_back(sentence: _Sentence) -> bool:
    first = _WORD_RE.match(sentence.text)
    return bool(first) and _term(first.group(2)) in DEPENDENT_OPENERS


def _with_dependencies(sentences: list[_Sentence], picked: list[int]) -> list[list[int]]:
    """Group each picked sentence with what it depends on, in order, each sentence once.

    A sentence opening with "it", "that", "so"... takes the one before it; a question takes the
    next sentence when someone else says it (its answer); an answer takes its question.
    """
    groups: list[list[int]] = []
    used: set[int] = set()
    for index in picked:
        group = [index]
        before = index - 1
        if (
            before >= 0
            and sentences[before].weight >= 2
            and (
                _leans_back(sentences[index])
                or (_is_question(sentences[before]) and sentences[before].speaker != sentences[index].speaker)
            )
        ):
            group.insert(0, before)
        after = index + 1
        if (
            _is_question(sentences[index])
            and after < len(sentences)
            and sentences[after].speaker != sentences[index].speaker
        ):
            group.append(after)
        group = [i for i in group if i not in used]
        if group:
            groups.append(group)
            used.update(group)
    return groups


def _facts(sentences: list[_Sentence], group: list[int]) -> str:
    """One fact from sentences said one after another: the speaker named when it changes."""
    parts: list[str] = []
    speaker = None
    for index in group:
        sentence = sentences[index]
        if sentence.speaker != speaker:
            parts.append(_fact(sentence))
            speaker = sentence.speaker
        else:
            parts.append(sentence.text)
    return " ".join(parts)


def _main_place(sentences: list[_Sentence], speakers: list[str], pov: str | None) -> list[str]:
    people = {name.casefold() for name in speakers} | ({pov.casefold()} if pov else set())
    counts: Counter[str] = Counter()
    display: dict[str, str] = {}
    for sentence in sentences:
        for place in sentence.places:
            key = place.casefold()
            if key in people:
                continue
            counts[key] += 1
            display.setdefault(key, place)
    if not counts:
        return []
    # Counter.most_common keeps first-seen order among equal counts.
    return [display[counts.most_common(1)[0][0]]]


def _keywords(
    sentences: list[_Sentence],
    idf: Mapping[str, float] | ChatStats,
    default: float,
    facts: list[_Sentence],
    speakers: list[str],
    common: frozenset[str] = frozenset(),
) -> list[str]:
    """Return the block's most distinctive names, nouns and quantities, best first.

    Plain words are keywords only when they are nouns (seen heading a phrase after "the", "a",
    "his"...) and not among the chat's `common` words."""
    fact_terms = {term for sentence in facts for term in sentence.terms}
    fact_names = {name.casefold() for sentence in facts for name in sentence.names}
    fact_orders = {sentence.order for sentence in facts}
    frequency: Counter[str] = Counter()
    nounish: set[str] = set()
    for sentence in sentences:
        frequency.update(sentence.terms)
        nounish |= sentence.nounish
    scores: dict[str, float] = {}
    display: dict[str, str] = {}
    first: dict[str, int] = {}

    def offer(key: str, shown: str, score: float) -> None:
        if key not in scores or score > scores[key]:
            scores[key] = score
        display.setdefault(key, shown)
        first.setdefault(key, len(first))

    for term, count in frequency.items():  # in order of first appearance
        if term in NOT_KEYWORDS or len(term) > MAX_NAME:
            continue
        if len(term) > 8 and not term.isascii() and _CJK_RE.search(term):
            continue  # a whole clause, not a keyword
        score = idf.get(term, default) * (1 + math.log(count))
        if term not in nounish or term in common:
            continue  # verbs, adjectives and the chat's everyday nouns tell no stretch apart
        if term in fact_terms:
            score += FACT_TERM_BONUS
        offer(term, term, score)

    speaker_keys = {speaker.casefold() for speaker in speakers}
    name_counts: Counter[str] = Counter()
    name_display: dict[str, str] = {}
    for sentence in sentences:
        for name in sentence.names:
            name_counts[name.casefold()] += 1
            name_display.setdefault(name.casefold(), name)
    for name_key, count in name_counts.items():
        words = [_term(word) for word in name_key.split()]
        if len(name_key) < 2:
            continue  # an initial
        score = default * (1 + math.log(count)) + KEYWORD_NAME_BONUS
        if len(words) == 1:
            score = max(score, scores.get(words[0], 0.0) + KEYWORD_NAME_BONUS)
        else:
            for word in words:
                # The words of a name phrase ("Rusty", "Anchor") give way to the phrase.
                if word in scores and frequency[word] <= count:
                    del scores[word]
        if name_key in fact_names:
            score += FACT_TERM_BONUS
        if name_key in speaker_keys:
            score *= SPEAKER_FACTOR
        key = words[0] if len(words) == 1 else name_key
        # A name's score replaces its plain word's, so a speaker's name ranks low even if often said.
        scores[key] = score
        display[key] = name_display[name_key]
        first.setdefault(key, len(first))

    for sentence in sentences:
        for quantity in sentence.quantities:
            key = quantity.casefold()
            offer(key, quantity, default + (FACT_TERM_BONUS if sentence.order in fact_orders else 0.0))

    ranked = sorted(scores, key=lambda key: (-scores[key], first[key]))
    keywords = [display[key] for key in ranked[:MAX_KEYWORDS]]
    keys = {keyword.casefold() for keyword in keywords}
    keywords += [speaker for speaker in speakers if speaker.casefold() not in keys]
    return keywords[:MAX_KEYWORDS]


def heading_parts(heading: str) -> tuple[str | None, list[str], list[str], list[datetime.date]]:
    """Split a heading into (pov, speakers, settings, days), reading `summarise`'s own layout.

    A heading written some other way (by a model) gives its capitalised names as speakers and
    any dates it mentions; its settings are not guessed.
    """
    text = heading if isinstance(heading, str) else ""
    pov = None
    match = _POV_RE.match(text)
    if match:
        pov, text = match.group("pov"), text[match.end() :]
    days = _days_in(text)
    parts = [part.strip() for part in text.split(" — ")]
    if parts and _days_in(parts[-1]) and len(parts) > 1:
        parts.pop()
    who = parts[0] if parts else ""
    names = [name.strip() for name in re.split(r",\s*|\s+and\s+", who) if name.strip()]
    names = [name for name in names if not _OTHERS_RE.match(name) and name != NO_SPEAKERS]
    if who in (EMPTY_HEADING, NO_SPEAKERS):
        return pov, [], [part for part in parts[1:] if part], days
    if all(_looks_like_name(name) for name in names):
        settings = [place.strip() for part in parts[1:] for place in part.split(" → ") if place.strip()]
        return pov, names, settings, days
    names = [name for name in proper_names(text, initial=True) if name.casefold() not in NOT_NAMES]
    return pov, names, [], days


def _looks_like_name(name: str) -> bool:
    words = name.split()
    return 0 < len(words) <= 4 and len(name) <= MAX_NAME and not any(word[:1].islower() for word in words)


def _days_in(text: str) -> list[datetime.date]:
    days = []

    def add(day: str, month: str | None, year: str) -> None:
        if month and month.lower() in _MONTH_INDEX:
            try:
                days.append(datetime.date(int(year), _MONTH_INDEX[month.lower()], int(day)))
            except ValueError:
                pass

    for match in _DATE_RANGE_RE.finditer(text):
        add(match["d1"], match["m1"] or match["m2"], match["y1"] or match["y2"])
        add(match["d2"], match["m2"], match["y2"])
    if not days:
        for match in _DATE_RE.finditer(text):
            add(match["d"], match["m"], match["y"])
    return days


def proper_names(text: str, *, initial: bool = False) -> list[str]:
    """Return the capitalised words and phrases of a text, first seen first.

    Those that open a sentence are left out (they may be ordinary words) unless `initial` is set.
    """
    names: list[str] = []
    seen: set[str] = set()
    for sentence in split_sentences(text[:MAX_MESSAGE] if isinstance(text, str) else ""):
        analysed = _analyse(sentence, 0, "", frozenset())
        for name in analysed.names:
            if name.startswith("\0"):
                if not initial:
                    continue
                name = name[1:]
            key = name.casefold()
            if len(key) > 1 and key not in seen and key not in NOT_NAMES:
                seen.add(key)
                names.append(name)
    return names


def roll_up(children: list[Draft], *, times: Sequence[datetime.datetime | None] = ()) -> Draft:
    """Merge drafts, oldest first, into one broader draft that keeps at least one fact from each.

    The heading merges the children's speakers and settings and spans `times` (else the dates
    in the children's headings); keywords are ranked by how many children share them.
    """
    children = [child for child in (children or ()) if isinstance(child, Draft)]
    povs, speakers, settings, days = [], [], [], []
    setting_counts: Counter[str] = Counter()
    for child in children:
        pov, names, places, child_days = heading_parts(child.heading)
        povs.append(pov)
        days.extend(child_days)
        for name in names:
            if name.casefold() not in {speaker.casefold() for speaker in speakers}:
                speakers.append(name)
        for place in places:
            if place.casefold() not in setting_counts:
                settings.append(place)
            setting_counts[place.casefold()] += 1
    # Keep the three most mentioned settings, still in the order the story reached them.
    top = {key for key, _ in setting_counts.most_common(3)}
    settings = [place for place in settings if place.casefold() in top]
    moments = [moment for moment in (times or ()) if isinstance(moment, datetime.date)]
    when = when_label(moments or days)
    pov = povs[0] if povs and povs[0] and all(other == povs[0] for other in povs) else None
    if not children:
        return clip(Draft(heading=EMPTY_HEADING + (f" — {when}" if when else "")))
    heading = _heading(speakers, settings, when, pov)

    facts: list[tuple[int, int, str]] = []
    seen: set[str] = set()
    for child_index, child in enumerate(children):
        for fact_index, fact in enumerate(child.facts or ()):
            if isinstance(fact, str) and fact.strip() and fact.strip().casefold() not in seen:
                seen.add(fact.strip().casefold())
                facts.append((child_index, fact_index, fact.strip()))
    fact_terms = [terms(fact) for _, _, fact in facts]
    table = _local_idf(fact_terms)
    default = max(table.values(), default=1.0)
    candidates = []
    for (_, _, fact), found in zip(facts, fact_terms, strict=True):
        bonus = len(proper_names(fact)) + len(_quantities(fact))
        candidates.append((_score(set(found), table, default, bonus), 0, set(found)))
    # First the best fact of each child (the arc), then the best of the rest.
    best: dict[int, int] = {}
    for index, (child_index, _, _) in enumerate(facts):
        if child_index not in best or candidates[index][0] > candidates[best[child_index]][0]:
            best[child_index] = index
    firsts = sorted(best.values(), key=lambda index: -candidates[index][0])[:MAX_FACTS]
    picked = sorted(_pick(candidates, MAX_FACTS, chosen=firsts), key=lambda index: facts[index][:2])

    counts: Counter[str] = Counter()
    rank: dict[str, float] = {}
    shown: dict[str, str] = {}
    for child in children:
        keywords = [
            keyword.strip()
            for keyword in child.keywords or ()
            if isinstance(keyword, str) and keyword.strip()
        ]
        for position, keyword in enumerate(keywords):
            key = keyword.casefold()
            counts[key] += 1
            rank[key] = rank.get(key, 0.0) + position / len(keywords)
            shown.setdefault(key, keyword)
    order = {key: index for index, key in enumerate(shown)}
    merged = sorted(counts, key=lambda key: (-counts[key], rank[key] / counts[key], order[key]))
    return clip(
        Draft(
            heading=heading,
            facts=[facts[index][2] for index in picked],
            keywords=[shown[key] for key in merged],
        )
    )
