"""Deterministic generator of the conversational labelled set (``python -m bench.data.conversations``).

Long two-person chats, the shape an agent gets when it imports a chat history: every turn
is one episode with content ``"Name: text"``, ``occurred_at`` = its session's date (all
turns of a session share it; their order is the file order) and ``metadata.dia_id`` =
``"D<session>:<turn>"``; one namespace per conversation. Writes two JSONL files next to
this script (committed; regenerating must reproduce them byte for byte):

* ``conversations_turns.jsonl`` — ``{"namespace", "dia_id", "speaker", "content",
  "occurred_at"}`` in import order;
* ``conversations_questions.jsonl`` — ``{"id", "split", "kind", "shape", "query",
  "namespace", "evidence", "answer", "subject"}``: ``evidence`` lists the dia_ids that hold
  the answer; ``shape`` is ``"list"`` for the questions that gather one person's threads
  across sessions ("What does she do in her spare time?"), else ``"single"``;
* ``conversations_facts.jsonl`` — ``{"key", "split", "namespace", "session", "content",
  "evidence", "valid_from", "entity", "property", "value", "subject"}``: the facts a capable
  model would derive, per session, about everything a turn states (about 0.43 per turn,
  a fifth of the story turns missed; ``bench/data/conversation_facts.py``), each citing
  the turn it restates; ``valid_from`` is that turn's session date.

Every conversation follows two friends over 22 to 30 sessions. Each session mixes
greetings and chit-chat with story threads ("arcs") about one of them: a pet adopted
and later ill, a job that changes, a trip planned and then moved, a race run on a date,
a hobby picked up... Arcs span sessions, so persona details evolve and plans change;
replies use pronouns ("he", "that place"), and the detail that answers a question often
sits in the turn after the one that names the subject. Turns run long: chit-chat turns
say two or three things, and most story lines come wrapped in chit-chat. The chats keep
returning to each arc's subject in passing ("near misses": "My mom asked about Biscuit
again") without saying anything a question asks; a model's facts restate those too.

Question kinds (as people ask them: synonyms, indirect references, few shared words):
``single_hop`` (one session), ``multi_hop`` (evidence in two or more sessions),
``temporal`` (the answer needs the session date: "when did ..."; the turn mostly says
"last week", "yesterday"; or two sessions' dates: "how long did ...") and ``inferential`` ("would she enjoy ...", answered by what
the persona turns imply). Splits alternate per conversation (even conversations: dev,
odd: test), so no conversation leaks between them.

**Shaped after the outside benchmark (LoCoMo, issue 55).** The first version of this set
was far kinder than the public conversational benchmark it imitates: TEST recall@10 with
facts and profiles 0.881 (single-hop 0.994, temporal 1.000) against the outside's 0.786
(0.872, 0.828). Compared property by property (the outside file is not in this
repository; figures measured on its ten conversations, every question, categories 1–4;
"ours" is this set before → after the 2026-12-07 reshaping):

=====================================================  ===========  ==============
property                                               outside      ours
=====================================================  ===========  ==============
sessions per conversation                              19–32 (27)   18–20 → 22–30
turns per session                                      21.6         29.9 → 22.9
words per turn (mean)                                  26.0         9.1 → 21.2
words per evidence turn (mean)                         37–41        13 → 26–28
turns sharing 2+ content words with a question         78 (med 41)  16 (7) → 38 (20)
multi-hop: evidence turns / sessions per question      3.12 / 2.67  2.31 / 2.28 → 2.74 / 2.37
multi-hop with 3+ evidence turns                       50%          25% → 68%
inferential: evidence turns, share multi-session       2.26, 37%    1.80, 35% → 1.71, 31%
temporal: evidence turns, share multi-session          1.17, 9%     1.00, 0% → 1.21, 21%
question's words found in its evidence: single-hop    0.51         0.54 → 0.53
question's words found in its evidence: multi-hop      0.52         0.39 → 0.45
question's words found in its evidence: temporal       0.58         0.71 → 0.50
question's words found in its evidence: inferential    0.37         0.40 → 0.37
temporal evidence stating a relative date              74%          36% → 78%
facts per turn, turns cited per fact                   0.43, 1.01   0.43, 1.00 (kept)
evidence turns cited by some fact                      0.80         0.80 → 0.82
multi-hop questions whose every evidence turn is cited 0.57         0.66 → 0.57
uncited evidence with a fact citing a turn within 2    88%          93% → 95%
words per fact (mean)                                  14.8         9.2 → 12.1
facts that supersede another (same entity, property)   none         1,099 → none
=====================================================  ===========  ==============

What is not matched: the outside asks twice as many questions per conversation (154
against 80), so a quarter of its turns are some question's evidence (ours: a tenth), and
its question kinds are mixed differently (single-hop 55%, multi-hop 18%, temporal 21%,
inferential 6%; ours 34 / 33 / 18 / 15%), so the all-question figures differ even
where the per-kind ones agree; compare per kind. The knobs below (``SESSIONS`` ...
``NEAR_MISS_FACT``) and the question wordings were set by measuring recall as shipped on
TEST against the outside's per-kind figures (``bench/README.md``, targets table).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.data import conversation_facts, jsonl

SEED = 20261130
HERE = Path(__file__).parent
TURNS_FILE = "conversations_turns.jsonl"
QUESTIONS_FILE = "conversations_questions.jsonl"
FACTS_FILE = "conversations_facts.jsonl"
CONVERSATIONS = 12
#: sessions per conversation (the outside benchmark: 19 to 32, 27 on average)
SESSIONS = (22, 30)
#: turns per session before the closing pair, fillers included (outside: 21.6 on average)
SESSION_TURNS = 18
#: chit-chat turns before each story part
GAP_FILLERS = (0, 2)
#: sentences in a chit-chat turn (the outside's turns run 26 words on average, not one line)
FILLER_SENTENCES = (2, 2, 3, 3)
#: the chance that a story turn also carries a chit-chat sentence before it, and after it
PAD_BEFORE = 0.7
PAD_AFTER = 0.7
#: passing mentions per arc that name its subject and answer nothing: the outside's chats
#: return to the same few topics in most sessions, so many turns share a question's words
NEAR_MISSES = 5

PEOPLE = [
    ("Caroline", "she"), ("Melanie", "she"), ("Jon", "he"), ("Gina", "she"), ("Tariq", "he"), ("Nora", "she"),
    ("Evan", "he"), ("Priya", "she"), ("Marcus", "he"), ("Leah", "she"), ("Andre", "he"), ("Sofia", "she"),
    ("Dev", "he"), ("Hannah", "she"), ("Luis", "he"), ("Mei", "she"), ("Oliver", "he"), ("Zara", "she"),
    ("Felix", "he"), ("Rosa", "she"), ("Sam", "he"), ("Ines", "she"), ("Kofi", "he"), ("Tessa", "she"),
]

PRONOUNS = {"she": {"sub": "she", "obj": "her", "pos": "her"}, "he": {"sub": "he", "obj": "him", "pos": "his"}}


@dataclass
class Person:
    name: str
    sub: str
    obj: str
    pos: str


@dataclass
class Arc:
    """One story thread about a subject: parts placed in increasing sessions, plus questions.

    ``parts[i]`` is a list of (role, text, tag): role "A" is the subject, "B" the friend;
    a tag marks a turn that a question cites as evidence. Questions are (kind, text, tags,
    answer); an answer of ``"@date:<tag>"`` is filled with that turn's session date.
    """

    parts: list[list[tuple[str, str, str | None]]]
    questions: list[tuple[str, str, list[str], str]] = field(default_factory=list)
    #: passing mentions in later sessions (role, text): they name the arc's subject without
    #: answering anything, as people do ("How's Biscuit?")
    echoes: list[tuple[str, str]] = field(default_factory=list)
    #: the arc's type ("pet", "job", ...) and planted truth (breed, name, job, ...): what
    #: ``conversation_facts`` writes derived facts and list questions from
    name: str = ""
    truth: dict[str, str] = field(default_factory=dict)
    #: noun phrases naming the arc's subject ("{my} beagle"), for the near misses
    topics: list[str] = field(default_factory=list)


# --- chit-chat: greetings, fillers, closings (no question ever cites them) ------------------

OPENERS = [
    ("Hey {B}! It's been a minute. How have you been?", "Hey {A}! Busy but good, honestly. You?"),
    ("Hi {B}, long week?", "The longest. I'm so glad it's Friday-ish. How about you?"),
    ("{B}! I was just thinking about you.", "Aw, {A}! Good things I hope. What's new?"),
    ("Morning {B}, got a sec to catch up?", "Always. Coffee in hand, go."),
    ("Hey you. How's everything going?", "Pretty good! A lot happened since we last talked, actually."),
    ("Hi {B}! Finally some free time to chat.", "Same here, things have been hectic. How are you doing?"),
    ("Hey {B}, how was your weekend?", "Too short as always, ha. Yours?"),
    ("Hello hello! Miss our chats.", "Me too! Okay, tell me everything."),
]
FILLERS = [
    "Haha, that's so you.",
    "Wow, I did not see that coming.",
    "That sounds amazing, honestly.",
    "Oh no, that's rough. I'm sorry.",
    "Totally get that.",
    "Lol yes, exactly what I was thinking.",
    "Honestly this week flew by, I can't believe it's already the weekend again.",
    "I've been so tired lately, work has been nonstop.",
    "My mom called again asking about the holidays, you know how it is.",
    "We should grab coffee soon, it's been way too long.",
    "The weather has been wild here, sunny one day and pouring the next.",
    "I keep meaning to read more but I just end up scrolling on my phone.",
    "Did you watch the game last night? What a finish.",
    "I'm trying to drink more water and go to bed earlier, wish me luck.",
    "Ugh, my neighbor's been doing renovations since 7am every day.",
    "That reminds me, I still owe you a call about that thing.",
    "You always know how to make me feel better about stuff like this.",
    "I'm so proud of you, seriously.",
    "That's such a good point, I never thought about it that way.",
    "Okay, that made me laugh way too hard.",
    "Family stuff is always complicated, isn't it?",
    "I love hearing about this, keep me posted!",
    "Work is work, you know. Same old meetings.",
    "Sometimes you just need a quiet evening at home with a good show.",
    "It's funny how things work out sometimes.",
    "I feel like I haven't had a real break in months.",
    "Honestly, good for you. You deserve it.",
    "That's a lot to handle at once. How are you holding up?",
    "Ha! I remember when we talked about that ages ago.",
    "Nice! Let me know how it goes.",
    "Can't wait to hear more about it next time.",
    "My brother says hi, by the way. He asks about you all the time.",
    "I've been meaning to clean out my closet for weeks now.",
    "Traffic this morning was unbelievable, took me an hour to get anywhere.",
    "Yeah, I think everyone's feeling a bit burnt out lately.",
    "We finally fixed the leaky kitchen tap, small victories!",
    "I tried a new recipe last night and it was a total disaster, lol.",
    "So true. Life just gets busy.",
    "Anyway, enough about that. What else is going on with you?",
    "Oh, I totally forgot to tell you something last time!",
]
CLOSERS = [
    ("Okay I have to run, talk soon!", "Bye {A}! Take care."),
    ("This was great, let's not wait so long next time.", "Deal. Talk soon!"),
    ("I should get going, but it was so good to catch up.", "Same! Say hi to everyone for me."),
    ("Alright, dinner's calling. Catch you later!", "Enjoy! Later, {A}."),
    ("Gotta go, but keep me updated on everything.", "Will do, you too!"),
]

#: near misses (``NEAR_MISSES``): a turn naming an arc's subject ``{T}`` that answers nothing,
#: said by the arc's subject (``{T}`` in the first person) or by the friend (second person)
NEAR_MISS_A = [
    ("I was telling my coworker about {T} today and she had a million questions.", "{A} told a coworker about {T}"),
    ("Funny, {T} came up at dinner last night and I would not stop talking.", "{A} talked about {T} at dinner"),
    ("I keep thinking about {T}, more than I should, honestly.", "{A} keeps thinking about {T}"),
    ("My mom asked about {T} again, she's weirdly invested.", "{A}'s mother keeps asking about {T}"),
    ("Not much new on {T}, same as last time really.", "Nothing much has changed with {T} lately"),
    ("Remind me to tell you a funny story about {T} next time, I'm too tired now.",
     "{A} has a funny story about {T} to tell {B}"),
    ("Someone at the gym asked me about {T} and I realised how much I love talking about it.",
     "{A} loves talking about {T}"),
    ("I posted something about {T} and my aunt left the longest comment, lol.", "{A} posted online about {T}"),
]
NEAR_MISS_B = [
    ("Any news about {T}? You never finished the story last time.", "{B} asked {A} for news about {T}"),
    ("I was just telling my sister about {T}, she thinks it's so cool.", "{B}'s sister thinks {T} is cool"),
    ("Still thinking about what you said about {T}.", "{B} is still thinking about {T}"),
    ("Wait, remind me, what's the latest with {T}?", "{B} wants an update on {T}"),
]
#: the chance that a near miss gets a derived fact (restating it, about the same subject)
NEAR_MISS_FACT = 1.0
#: the chance that a chit-chat statement a model could restate gets its fact
CHAT_FACT = 0.7


# --- arcs -------------------------------------------------------------------------------------

BREEDS = [("beagle", "dog"), ("border collie", "dog"), ("greyhound", "dog"), ("corgi", "dog"),
          ("tabby", "cat"), ("Maine Coon", "cat"), ("Siamese", "cat"), ("lop-eared rabbit", "rabbit")]
PET_NAMES = ["Biscuit", "Pepper", "Milo", "Juniper", "Waffles", "Pickle", "Olive", "Bruno", "Mochi", "Ziggy"]
JOBS = [("nurse", "the children's hospital", "head nurse on the night shift"),
        ("graphic designer", "a small branding studio", "art director"),
        ("software developer", "a logistics startup", "team lead"),
        ("high school teacher", "Westbrook High", "head of the science department"),
        ("chef", "a tapas restaurant downtown", "sous-chef"),
        ("accountant", "a mid-sized firm", "senior auditor"),
        ("physical therapist", "a sports clinic", "clinic manager")]
FREELANCE = ["went freelance", "opened my own little practice", "started consulting on my own"]
TRIPS = [("Lisbon", "Kyoto"), ("Iceland", "Scotland"), ("Mexico City", "Oaxaca"), ("Greece", "Croatia"),
         ("Vancouver", "Montreal"), ("Morocco", "Portugal"), ("Bali", "Vietnam"), ("Norway", "Finland")]
TRIP_REASONS = ["the flights doubled in price", "my cousin's wedding got moved to that week",
                "my passport renewal is taking forever", "we found a crazy deal at the last minute"]
RACES = [("half marathon", "13 miles"), ("10k", "ten kilometres"), ("sprint triathlon", "a swim, a bike and a run"),
         ("trail race", "eight miles up and down the ridge")]
INSTRUMENTS = ["cello", "ukulele", "piano", "drums", "saxophone", "violin"]
CRAFTS = [("pottery", "bowls that came out lopsided"), ("woodworking", "a wobbly little stool"),
          ("knitting", "a scarf with way too many holes"), ("watercolour painting", "a muddy little sunset"),
          ("candle making", "candles that smell like burnt sugar")]
BOOKS = [("The Overstory", "trees"), ("Project Hail Mary", "a lonely astronaut"), ("Circe", "a Greek witch"),
         ("Educated", "a girl who grew up off the grid"), ("Piranesi", "a man living in an endless house"),
         ("The Midnight Library", "all the lives you could have lived")]
SIBLINGS = [("sister", "she", "her"), ("brother", "he", "him")]
MOVES = [("a two-bedroom by the river", "the old place on Maple Street"),
         ("a little house with a garden", "my tiny studio above the bakery"),
         ("a loft near the train station", "my parents' basement"),
         ("a cottage just outside town", "the apartment downtown")]
VOLUNTEER = [("the animal shelter", "walking the dogs nobody adopts"), ("a food bank", "sorting donations"),
             ("the community garden", "weeding and teaching kids to plant"),
             ("a literacy program", "reading with kids after school"),
             ("an LGBTQ youth support group", "running the Tuesday evening meetups")]
HEALTH = [("sprained my ankle", "a walking boot for three weeks"), ("broke my wrist", "a cast until next month"),
          ("threw out my back", "physio twice a week"), ("had my wisdom teeth out", "soup for a week")]
CARS = [("an old red pickup", "a used hybrid"), ("a vintage Beetle", "an electric hatchback"),
        ("a minivan", "a little two-seater")]
GARDEN = [("tomatoes", "basil"), ("strawberries", "mint"), ("zucchini", "sunflowers"), ("peppers", "lavender")]
COOK = [("sourdough", "a starter I named Doug"), ("ramen from scratch", "a broth that takes twelve hours"),
        ("Ethiopian food", "injera that keeps falling apart"), ("Thai curries", "a paste I pound by hand")]
CONCERTS = [("Taylor Swift", "screamed the whole night"), ("a jazz trio at the Blue Door", "sat right by the stage"),
            ("Coldplay", "the wristbands lit up for every song"), ("the symphony", "cried during the second piece")]
CLASSES = [("a night course in Spanish", "conjugations"), ("an online course in data analysis", "spreadsheets"),
           ("a photography workshop", "shooting in manual mode"), ("a first-aid certification", "CPR dummies")]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _arcs(rng: random.Random, a: Person, b: Person) -> list[Arc]:
    """Every arc type for subject ``a`` (friend ``b``); the caller picks a subset."""
    A, s, p = a.name, a.sub, a.pos
    arcs: list[Arc] = []

    breed, animal = rng.choice(BREEDS)
    pet = rng.choice(PET_NAMES)
    psub = rng.choice(["he", "she"])
    ppos = "his" if psub == "he" else "her"
    psub_obj = "him" if psub == "he" else "her"
    day = rng.choice(WEEKDAYS)
    arcs.append(Arc(
        parts=[
            [("A", f"Big news, we finally brought home a {breed} from the rescue on {day}!", "adopt"),
             ("B", f"Stop it!! What's {psub} called?", None),
             ("A", f"{pet}. {psub.capitalize()} already stole my spot on the couch, lol.", "name"),
             ("B", "Of course. Send me a million pictures please.", "pics")],
            [("A", f"Ugh, rough few days. {pet} had to have surgery on {ppos} back leg.", "surgery"),
             ("B", f"Oh no! Is {psub} okay?", None),
             ("A", f"The vet says {psub}'ll be fine, just a cone and no jumping for a while. I barely slept though.",
              "recover")],
        ],
        questions=[
            ("single_hop", f"What kind of {animal} does {A} have?", ["adopt"], breed),
            ("single_hop", f"What is the name of {A}'s {breed}?", ["adopt", "name"], pet),
            ("temporal", f"When did {A} adopt the {breed}?", ["adopt"], "@date:adopt"),
            ("multi_hop", f"What happened to {pet} after {A} brought {psub_obj} home?", ["adopt", "surgery", "recover"],
             "it needed an operation on a hind leg"),
            ("inferential", f"Would {A} need someone to look after the house when traveling?", ["adopt"], "yes"),
        ]))

    job, where, promo = rng.choice(JOBS)
    free = rng.choice(FREELANCE)
    arcs.append(Arc(
        parts=[
            [("B", "How's the new gig going?", None),
             ("A", f"Honestly better than I expected. Being a {job} at {where} is hectic but the team is lovely.",
              "job"),
             ("B", "That's great, you sounded so stressed about it before.", "stress")],
            [("A", f"So... they offered me the {promo} role!", "promo"),
             ("B", "WHAT. Congratulations!! You earned it.", None),
             ("A", "Thanks! More money, way more responsibility. Still processing it.", "promo2")],
            [("A", f"Okay, big life update: I quit last week. I {free}.", "quit"),
             ("B", "Whoa, brave move. How does it feel?", None),
             ("A", "Terrifying and freeing at the same time. I'm my own boss now.", "quit2")],
        ],
        questions=[
            ("single_hop", f"Where does {A} work as a {job}?", ["job"], f"{job} at {where}"),
            ("single_hop", f"What position was {A} offered?", ["promo"], promo),
            ("multi_hop", f"How did {A}'s work as a {job} change over the year?", ["job", "promo", "quit"],
             f"{job}, promoted, then left to work independently"),
            ("temporal", f"When did {A} quit {p} job?", ["quit"], "@date:quit:lastweek"),
            ("inferential", f"Does {A} like being {p} own boss?", ["quit", "quit2"], "yes"),
        ]))

    first, second = rng.choice(TRIPS)
    reason = rng.choice(TRIP_REASONS)
    arcs.append(Arc(
        parts=[
            [("A", f"I'm finally planning a real vacation. Thinking {first} for a couple of weeks this summer.",
              "plan"),
             ("B", "Ooh, I've heard it's gorgeous. Who's going?", None),
             ("A", "Just me and my partner. First trip without the kids!", "plan2")],
            [("B", "Are you still doing the big trip?", None),
             ("A", f"Change of plans, we're going to {second} instead. {reason.capitalize()}.", "change"),
             ("B", "Honestly that sounds even better.", None)],
            [("A", f"Just got back from {second}! Ate way too much and walked like 20,000 steps a day.", "back"),
             ("B", "Welcome home! Best part?", None),
             ("A", "Watching the sunset from an old fort on the last night. Unreal.", "best")],
        ],
        questions=[
            ("single_hop", f"Where was {A} first planning to go on vacation?", ["plan"], first),
            ("multi_hop", f"Where did {A} go instead of {first}, and why?",
             ["plan", "change", "back"], f"{second}; {reason}"),
            ("temporal", f"When did {A} return from {second}?", ["back"], "@date:back"),
            ("single_hop", f"What was the best part of {A}'s trip to {second}?", ["best"], "sunset from an old fort"),
            ("inferential", f"Is {A} a parent?", ["plan2"], "yes"),
        ]))

    race, dist = rng.choice(RACES)
    arcs.append(Arc(
        parts=[
            [("A", f"I signed up for a {race}. No idea what I was thinking.", "signup"),
             ("B", "You'll crush it. How long is it?", None),
             ("A", f"It's {dist}. I've been getting up at 5 to train, my legs hate me.", "train")],
            [("A", f"I did it!! Finished the {race} last Sunday.", "race"),
             ("B", "AMAZING. What was your time?", None),
             ("A", "Just under two hours, I cried at the finish line, not gonna lie.", "time")],
        ],
        questions=[
            ("temporal", f"When did {A} run the {race}?", ["race"], "@date:race:sunday"),
            ("temporal", f"How long did {A} train before the race?", ["signup", "race"], "@span"),
            ("single_hop", f"How early does {A} get up to train?", ["train"], "early morning training"),
            ("multi_hop", f"What race did {A} sign up for and how did it go?", ["signup", "race", "time"],
             f"a {race}; finished it"),
            ("inferential", f"Does {A} like physical challenges?", ["signup", "race"], "yes"),
        ]))

    instrument = rng.choice(INSTRUMENTS)
    teacher = rng.choice(["Mr. Alvarez", "a retired jazz player", "a college student", "an online tutor"])
    arcs.append(Arc(
        parts=[
            [("A", f"Random, but I bought a secondhand {instrument}. I've always wanted to learn.", "buy"),
             ("B", "No way, since when are you musical?", None),
             ("A", f"Since now, apparently! Lessons with {teacher} on Saturdays.", "lessons")],
            [("B", "How's the music thing going?", None),
             ("A", "I played my first full song at the little recital at the library on Saturday. My hands were shaking.",
              "recital"),
             ("B", "That's huge! I wish I'd been there.", None)],
        ],
        questions=[
            ("single_hop", f"What instrument did {A} buy secondhand?", ["buy"], instrument),
            ("single_hop", f"Who is {A}'s music teacher?", ["lessons"], teacher),
            ("multi_hop", f"How has {A} progressed with the {instrument}?", ["buy", "lessons", "recital"],
             "bought one secondhand, then played a song at a recital"),
            ("temporal", f"When did {A} play the {instrument} for an audience?", ["recital"], "@date:recital:saturday"),
        ]))

    craft, result = rng.choice(CRAFTS)
    arcs.append(Arc(
        parts=[
            [("A", f"I started a {craft} class on Thursday nights at the community center.", "class"),
             ("B", "That sounds so relaxing. Made anything yet?", None),
             ("A", f"Oh yeah, {result}. I love them anyway.", "made")],
            [("A", "The class is doing a little market at the end of the month, I'm selling some of my stuff!",
              "market"),
             ("B", "I'm coming. Save me something.", "coming")],
        ],
        questions=[
            ("single_hop", f"What class does {A} take at the community center?", ["class"], craft),
            ("single_hop", f"What did {A} make in the {craft} class?", ["made"], result),
            ("inferential", f"Would {A} like a handmade gift?", ["class", "made"], "probably yes"),
            ("multi_hop", f"What will {A} do with {p} {craft} pieces?", ["class", "market"],
             "sell them at the class market"),
        ]))

    book, about = rng.choice(BOOKS)
    arcs.append(Arc(
        parts=[
            [("A", f"I just finished {book} and I can't stop thinking about it.", "book"),
             ("B", "I've heard of that! What's it about?", None),
             ("A", f"It's about {about}. The ending wrecked me.", "about")],
        ],
        questions=[
            ("single_hop", f"What book did {A} just finish?", ["book"], book),
            ("single_hop", f"What is {book} about?", ["book", "about"], about),
            ("inferential", f"Is {A} a fiction reader?", ["book"], "yes"),
        ]))

    sib, _, sobj = rng.choice(SIBLINGS)
    month = rng.choice(["June", "September", "October", "May"])
    arcs.append(Arc(
        parts=[
            [("A", f"My {sib} just got engaged! The wedding is in {month}.", "engaged"),
             ("B", f"Aww, tell {sobj} congrats from me!", None),
             ("A", "I will. I'm the maid of honor, no pressure lol." if s == "she"
              else "I will. I'm the best man, no pressure lol.", "role")],
            [("A", f"The wedding was this weekend. My {sib} looked so happy.", "wedding"),
             ("B", "Did your speech go okay?", None),
             ("A", "I only forgot one line and everyone cried anyway, so I'm counting it.", "speech")],
        ],
        questions=[
            ("single_hop", f"Who in {A}'s family got engaged?", ["engaged"], sib),
            ("temporal", f"When did {A}'s {sib} get married?", ["wedding"], "@date:wedding"),
            ("multi_hop", f"What was {A}'s role at the wedding and how did the speech go?",
             ["engaged", "role", "speech"], "gave the speech, went fine"),
        ]))

    new, old = rng.choice(MOVES)
    arcs.append(Arc(
        parts=[
            [("A", f"We signed a lease! Moving out of {old} next month.", "lease"),
             ("B", "Finally! Where to?", None),
             ("A", f"{new[0].upper() + new[1:]}. I'm weirdly emotional about it.", "where")],
            [("A", "Still unpacking boxes. I found my high school yearbook in the kitchen stuff, how??", "boxes"),
             ("B", "Classic move chaos. Is the new place treating you well?", None),
             ("A", "It's so quiet at night. I sleep like a baby now.", "quiet")],
        ],
        questions=[
            ("single_hop", f"Where is {A} moving?", ["where"], new),
            ("single_hop", f"Where did {A} live before moving?", ["lease"], old),
            ("multi_hop", f"How does {A} like the new place?", ["lease", "where", "quiet"],
             "emotional to leave, sleeps well in the quiet"),
            ("temporal", f"When did {A} settle on {new}?", ["lease"], "@date:lease"),
        ]))

    org, task = rng.choice(VOLUNTEER)
    arcs.append(Arc(
        parts=[
            [("A", f"I've started volunteering at {org} on weekends.", "volunteer"),
             ("B", "That's really lovely. What do you do there?", None),
             ("A", f"Mostly {task}. It fills my cup, you know?", "task")],
            [("A", "They asked me to help organize the fundraiser next month, I said yes before thinking.",
              "fundraiser"),
             ("B", "Ha, that's very you.", None)],
        ],
        questions=[
            ("single_hop", f"Where does {A} volunteer?", ["volunteer", "task"], f"{org}: {task}"),
            ("inferential", f"Is {A} the volunteering type?", ["volunteer", "fundraiser"],
             "yes"),
            ("multi_hop", f"What has {A} been helping with at {org}?",
             ["task", "fundraiser"], f"{task}; the fundraiser"),
        ]))

    injury, treatment = rng.choice(HEALTH)
    arcs.append(Arc(
        parts=[
            [("A", f"So I {injury} playing pickleball yesterday, of all things.", "injury"),
             ("B", "Oh no! Are you okay??", None),
             ("A", f"I'll live. {treatment[0].upper() + treatment[1:]}, doctor's orders.", "treatment")],
            [("B", "How are you healing up?", None),
             ("A", "Almost back to normal! First day without pain yesterday.", "healed")],
        ],
        questions=[
            ("single_hop", f"How did {A} get hurt?", ["injury"], "playing pickleball"),
            ("temporal", f"When did {A} get injured?", ["injury"], "@date:injury:yesterday"),
            ("temporal", f"How long was {A} out of action?", ["injury", "healed"], "@span"),
            ("multi_hop", f"How long did {A}'s recovery take?", ["injury", "treatment", "healed"], treatment),
        ]))

    old_car, new_car = rng.choice(CARS)
    arcs.append(Arc(
        parts=[
            [("A", f"My car finally died on the highway. RIP to {old_car}.", "died"),
             ("B", "Noooo. You loved that thing.", "loved")],
            [("A", f"Got a new ride! Well, new to me: {new_car}.", "newcar"),
             ("B", "Upgrade! Road trip?", None),
             ("A", "Already planning one, obviously.", "roadtrip")],
        ],
        questions=[
            ("multi_hop", f"What car did {A} get after the old one died?",
             ["died", "loved", "newcar"], f"{old_car} -> {new_car}"),
            ("single_hop", f"What does {A} drive now?", ["newcar"], new_car),
        ]))

    plant, herb = rng.choice(GARDEN)
    arcs.append(Arc(
        parts=[
            [("A", f"I planted {plant} and {herb} in the backyard. Fingers crossed.", "plant"),
             ("B", "Look at you with a green thumb!", None)],
            [("A", "The squirrels ate every single one of my tomatoes-to-be. I'm at war." if plant == "tomatoes"
              else f"Harvest time! We had {plant} with literally every meal this week.", "harvest"),
             ("B", "Haha, nature wins again.", None)],
        ],
        questions=[
            ("single_hop", f"What is growing in {A}'s garden?", ["plant"], f"{plant} and {herb}"),
            ("multi_hop", f"How did {A}'s {plant} turn out?", ["plant", "harvest"], "see harvest"),
            ("inferential", f"Does {A} have a yard?", ["plant"], "yes, a backyard"),
        ]))

    dish, detail = rng.choice(COOK)
    arcs.append(Arc(
        parts=[
            [("A", f"I've been obsessed with making {dish}. Currently babysitting {detail}.", "cook"),
             ("B", "You're turning into a real chef.", None),
             ("A", "Ha, my kitchen would disagree, it's a disaster zone.", "mess")],
        ],
        questions=[
            ("single_hop", f"What has {A} been obsessed with cooking?", ["cook"], dish),
            ("inferential", f"Would {A} enjoy a cooking class as a gift?", ["cook"], "likely yes"),
        ]))

    artist, moment = rng.choice(CONCERTS)
    arcs.append(Arc(
        parts=[
            [("A", f"Went to see {artist} last night with my cousin.", "concert"),
             ("B", "Jealous!! How was it?", None),
             ("A", f"Magical. We {moment}.", "moment")],
        ],
        questions=[
            ("single_hop", f"Who did {A} go see with {p} cousin?", ["concert"], artist),
            ("temporal", f"When did {A} see {artist}?", ["concert"], "@date:concert:yesterday"),
            ("single_hop", f"What was magical about the {artist} show?", ["moment"], moment),
        ]))

    course, topic = rng.choice(CLASSES)
    arcs.append(Arc(
        parts=[
            [("A", f"I enrolled in {course}. Back to being a student!", "enroll"),
             ("B", "Love that for you. Hard?", None),
             ("A", f"The {topic} part is kicking my butt, but I'm hanging in there.", "hard")],
            [("A", "Passed the final last week! Got the certificate framed, don't judge.", "passed"),
             ("B", "Judging zero percent. So proud!", None)],
        ],
        questions=[
            ("single_hop", f"What did {A} enroll in?", ["enroll"], course),
            ("multi_hop", f"Did {A} pass {p} course, and what part was hard?",
             ["enroll", "hard", "passed"], f"yes; {topic}"),
            ("temporal", f"When did {A} complete {p} {course}?", ["passed"], "@date:passed:lastweek"),
            ("temporal", f"How long did it take {A} to get {p} certificate?", ["enroll", "passed"], "@span"),
        ]))

    echoes = [
        [("B", f"How's {pet} doing? Still ruling the house?"), ("A", f"{pet} says hi, lol. Asleep on my feet.")],
        [("A", f"Work at {where} is insane this week."), ("B", f"Do you still like being a {job}?")],
        [("A", f"I keep looking at travel photos of {first} and {second}."), ("B", "Vacation brain, huh?")],
        [("A", f"My legs still remember that {race} training."), ("B", "Are you running again soon?")],
        [("A", f"Practiced the {instrument} for an hour, the neighbors must hate me."),
         ("B", "How are the lessons going?")],
        [("A", f"Missed {craft} this week, I was so bummed."), ("B", "Is the class still on Thursdays?")],
        [("B", f"I started {book} because of you!"), ("A", "Yay! Tell me when you get to the ending.")],
        [("A", f"My {sib} keeps sending me wedding stuff at midnight."), ("B", "Haha, the wedding chaos is real.")],
        [("B", "How's the new place?"), ("A", "Good! Still have boxes everywhere though.")],
        [("A", f"Long shift at {org} today, but worth it."), ("B", "You're a good person, you know that?")],
        [("B", "How's the pickleball injury?"), ("A", "Better, but I'm not going back to pickleball anytime soon.")],
        [("A", "Car trouble again, I swear cars hate me."), ("B", "Noo, what now?")],
        [("A", f"The {herb} is taking over the whole backyard."), ("B", "Gardening is harder than it looks!")],
        [("A", f"Made {dish} again last night."), ("B", "Save me some next time!")],
        [("A", f"I still have {artist} stuck in my head."), ("B", "That show sounded incredible.")],
        [("A", f"Studying for {course} all weekend, send snacks."), ("B", "You got this!")],
    ]
    # the planted truth of each arc, from which bench/data/conversation_facts.py writes the
    # facts a capable model would derive (no random draws here: the turns stay as they were)
    truths = [
        ("pet", {"breed": breed, "animal": animal, "pet": pet, "ppos": ppos, "day": day}),
        ("job", {"job": job, "where": where, "promo": promo, "free": free}),
        ("trip", {"first": first, "second": second, "reason": reason}),
        ("race", {"race": race, "dist": dist}),
        ("instrument", {"instrument": instrument, "teacher": teacher}),
        ("craft", {"craft": craft, "result": result}),
        ("book", {"book": book, "about": about}),
        ("wedding", {"sib": sib, "month": month}),
        ("move", {"new": new, "old": old}),
        ("volunteer", {"org": org, "task": task}),
        ("health", {"injury": injury, "treatment": treatment}),
        ("car", {"old_car": old_car, "new_car": new_car}),
        ("garden", {"plant": plant, "herb": herb}),
        ("cook", {"dish": dish, "detail": detail}),
        ("concert", {"artist": artist, "moment": moment}),
        ("class", {"course": course, "topic": topic}),
    ]
    topics = {
        "pet": [pet, f"{pet} the {breed}", f"{{my}} {breed}"],
        "job": [f"{{my}} job at {where}", where, f"being a {job}"],
        "trip": [first, f"the {second} trip", "{my} vacation plans"],
        "race": [f"the {race}", "{my} running", f"{{my}} {race} training"],
        "instrument": [f"the {instrument}", f"{{my}} {instrument} lessons"],
        "craft": [craft, f"{{my}} {craft} class"],
        "book": [book, f"that book about {about}"],
        "wedding": [f"{{my}} {sib}'s wedding", "the wedding"],
        "move": ["the move", "{my} new place", new],
        "volunteer": [org, "{my} volunteering"],
        "health": ["the pickleball injury", "{my} recovery"],
        "car": [new_car, "the car situation"],
        "garden": [f"the {plant}", "{my} garden", f"the {herb}"],
        "cook": [dish, f"{{my}} {dish} experiments"],
        "concert": [artist, f"the {artist} show"],
        "class": [course, "{my} course"],
    }
    for arc, lines, (name, truth) in zip(arcs, echoes, truths, strict=True):
        arc.echoes = lines
        arc.name = name
        arc.truth = {"A": A, "s": s, "p": p, "obj": a.obj, "B": b.name} | truth
        arc.topics = topics[name]
    return arcs


# --- assembly ---------------------------------------------------------------------------------


def _fmt(text: str, a: Person, b: Person) -> str:
    return text.replace("{A}", a.name).replace("{B}", b.name)


def _conversation(
    rng: random.Random, facts_rng: random.Random, index: int, one: Person, two: Person
) -> tuple[list[dict], list[dict], list[dict]]:
    namespace = f"/conv/c{index:02d}"
    sessions = rng.randint(*SESSIONS)
    start = datetime(2023, 1, 9, tzinfo=UTC) + timedelta(days=rng.randint(0, 60))
    dates = []
    day = start
    for _ in range(sessions):
        day += timedelta(days=rng.randint(5, 21))
        dates.append(day.replace(hour=rng.randint(9, 21), minute=rng.choice([0, 7, 15, 23, 30, 42, 56])))

    # (arc index, tag) -> the fact a near miss may yield: (statement, entity, property, value)
    near: dict[tuple[int, str], tuple[str, str, str, str]] = {}
    # arcs for both people, interleaved; each arc's parts go to increasing sessions
    chosen: list[tuple[Person, Person, Arc]] = []
    for subject, friend in ((one, two), (two, one)):
        arcs = _arcs(rng, subject, friend)
        rng.shuffle(arcs)
        chosen += [(subject, friend, arc) for arc in arcs[:9]]
    rng.shuffle(chosen)
    slots: list[list[tuple[Person, Person, list[tuple[str, str, str | None]], int, int]]] = [[] for _ in dates]
    load = [0] * sessions
    for arc_index, (subject, friend, arc) in enumerate(chosen):
        # a few random placements, keep the one landing in the least busy sessions, so
        # every session carries some story and none carries all of it
        tries = [sorted(rng.sample(range(sessions), len(arc.parts))) for _ in range(8)]
        positions = min(tries, key=lambda spots: sum(load[i] ** 2 for i in spots))
        for position in positions:
            load[position] += 1
        later = list(range(positions[0] + 1, sessions))
        for number, echo in enumerate(arc.echoes if later else []):
            slots[rng.choice(later)].append((subject, friend, [(echo[0], echo[1], f"echo{number}")], arc_index, -1))
        for number in range(NEAR_MISSES if later else 0):
            role = rng.choice("AAB")
            line, restated = rng.choice(NEAR_MISS_A if role == "A" else NEAR_MISS_B)
            topic = rng.choice(arc.topics)
            tag = f"near{number}"
            slots[rng.choice(later)].append(
                (subject, friend, [(role, line.replace("{T}", topic.replace("{my}", "my" if role == "A" else "your")),
                                    tag)], arc_index, -1))
            third = topic.replace("{my}", subject.pos if role == "A" else f"{subject.name}'s")
            speaker = subject if role == "A" else friend
            near[(arc_index, tag)] = (restated.format(A=subject.name, B=friend.name, T=third), speaker.name,
                                      f"mentioned {arc.name} {number}", third)
        for part_index, position in enumerate(positions):
            slots[position].append((subject, friend, arc.parts[part_index], arc_index, part_index))

    turns: list[dict] = []
    where: dict[tuple[int, str], str] = {}  # (arc index, tag) -> dia_id
    session_of: dict[str, int] = {}
    chatter: dict[str, list[str]] = {}  # dia_id -> the chit-chat sentences of a chit-chat turn
    padding: dict[str, list[str]] = {}  # dia_id -> the chit-chat sentences around a story turn
    for number, (date, parts) in enumerate(zip(dates, slots, strict=True), start=1):
        # (speaker, text, label, the chit-chat sentences a fact may restate)
        rows: list[tuple[Person, str, tuple[int, str] | None, list[str]]] = []
        opener, answer = rng.choice(OPENERS)
        first_speaker, other = (one, two) if number % 2 else (two, one)
        rows.append((first_speaker, _fmt(opener, first_speaker, other), None, []))
        rows.append((other, _fmt(answer, other, first_speaker), None, []))

        def chat(rows: list[tuple[Person, str, tuple[int, str] | None, list[str]]] = rows) -> None:
            said = rng.sample(FILLERS, rng.choice(FILLER_SENTENCES))
            rows.append((rng.choice((one, two)), " ".join(said), None, said))

        rng.shuffle(parts)
        for subject, friend, part, arc_index, _ in parts:
            for _ in range(rng.randint(*GAP_FILLERS)):
                chat()
            for role, text, tag in part:
                speaker = subject if role == "A" else friend
                before = rng.choice(FILLERS) if rng.random() < PAD_BEFORE else ""
                after = rng.choice(FILLERS) if rng.random() < PAD_AFTER else ""
                rows.append((speaker, " ".join(x for x in (before, text, after) if x),
                             (arc_index, tag) if tag else None, [x for x in (before, after) if x]))
        while len(rows) < SESSION_TURNS:
            chat()
        closer, bye = rng.choice(CLOSERS)
        rows.append((first_speaker, _fmt(closer, first_speaker, other), None, []))
        rows.append((other, _fmt(bye, first_speaker, other), None, []))
        for turn, (speaker, text, label, said) in enumerate(rows, start=1):
            dia_id = f"D{number}:{turn}"
            turns.append({"namespace": namespace, "dia_id": dia_id, "speaker": speaker.name,
                          "content": f"{speaker.name}: {text}", "occurred_at": date.isoformat()})
            session_of[dia_id] = number
            (padding if label else chatter)[dia_id] = said
            if label:
                where[label] = dia_id

    questions: list[dict] = []
    for arc_index, (subject, _, arc) in enumerate(chosen):
        for kind, text, tags, answer in arc.questions:
            evidence = [where[(arc_index, t)] for t in tags]
            if kind == "multi_hop" and len({session_of[d] for d in evidence}) < 2:
                continue  # parts landed in one session: not a multi-hop question here
            if answer == "@span":  # the time between the first and the last evidence turn's sessions
                first, last = (dates[session_of[d] - 1] for d in (evidence[0], evidence[-1]))
                answer = f"about {(last - first).days} days ({first:%d %B %Y} to {last:%d %B %Y})"
            if answer.startswith("@date:"):
                dia_id = where[(arc_index, answer.split(":")[1])]
                when = dates[session_of[dia_id] - 1]
                relative = answer.split(":")[2] if answer.count(":") > 1 else ""
                answer = {"sunday": f"the Sunday before {when:%d %B %Y}",
                          "saturday": f"the Saturday before {when:%d %B %Y}",
                          "lastweek": f"the week before {when:%d %B %Y}",
                          "yesterday": f"the day before {when:%d %B %Y}"}.get(relative, f"{when:%d %B %Y}")
            questions.append({"namespace": namespace, "kind": kind, "query": text, "evidence": evidence,
                              "answer": answer, "subject": subject.name, "shape": "single"})
    # questions that gather one person's arcs across sessions (bench/data/conversation_facts.py)
    for person in (one, two):
        theirs = [(i, arc) for i, (subject, _, arc) in enumerate(chosen) if subject is person]
        for kind, text, tags, answer in conversation_facts.list_questions(person.name, theirs):
            evidence = sorted({where[t] for t in tags}, key=_turn_order)
            if len({session_of[d] for d in evidence}) < 2:
                continue
            questions.append({"namespace": namespace, "kind": kind, "query": text, "evidence": evidence,
                              "answer": answer, "subject": person.name, "shape": "list"})

    # what a model derives per session: a fact for most story turns, one for each chit-chat
    # turn that states something (bench/data/conversation_facts.py)
    facts: list[dict] = []

    people = {p.name: p for p in (one, two)}
    speaker_of = {t["dia_id"]: people[t["speaker"]] for t in turns}

    def fact(dia_id: str, text: str, entity: str, prop: str, value: str, subject: str) -> None:
        session = session_of[dia_id]
        # a model restates the whole turn: what the chit-chat around a story line states
        # joins its fact (the outside's observations run 14.8 words, one line of ours 9)
        speaker = speaker_of[dia_id]
        for said in padding.get(dia_id, []):
            derived = conversation_facts.chat_fact(said, vars(speaker), (two if speaker is one else one).name,
                                                   facts_rng)
            if derived:
                said = derived[0][0].lower() + derived[0][1:] if derived[0].startswith("The ") else derived[0]
                text = f"{text}; {said}"
                break
        facts.append({"namespace": namespace, "session": session, "content": text, "evidence": [dia_id],
                      "valid_from": dates[session - 1].isoformat(), "entity": entity, "property": prop,
                      "value": value, "subject": subject})

    for arc_index, (subject, _, arc) in enumerate(chosen):
        for tag, text, entity, prop, value in conversation_facts.arc_facts(arc, facts_rng):
            if (arc_index, tag) in where:  # an echo is only said when a later session exists
                fact(where[(arc_index, tag)], text, entity, prop, value, subject.name)
    for (arc_index, tag), (text, entity, prop, value) in near.items():
        if facts_rng.random() < NEAR_MISS_FACT:
            fact(where[(arc_index, tag)], _cap(text), entity, prop, value, chosen[arc_index][0].name)
    for turn in turns:
        speaker = people[turn["speaker"]]
        friend = two if speaker is one else one
        for said in chatter.get(turn["dia_id"], [])[:1]:  # its first statement, if the model keeps it
            derived = conversation_facts.chat_fact(said, vars(speaker), friend.name, facts_rng)
            if derived and facts_rng.random() < CHAT_FACT:
                # a property of its own, as the outside's observations have: none supersedes another
                fact(turn["dia_id"], derived[0], speaker.name, f"{derived[1]}, {turn['dia_id']}", derived[2],
                     speaker.name)
    facts.sort(key=lambda f: (f["session"], _turn_order(f["evidence"][-1])))  # as each session yields them
    return turns, questions, facts


def _cap(text: str) -> str:
    return text[0].upper() + text[1:]


def _turn_order(dia_id: str) -> tuple[int, int]:
    session, turn = dia_id[1:].split(":")
    return int(session), int(turn)


def build(seed: int = SEED) -> dict[str, list[dict[str, Any]]]:
    rng = random.Random(seed)
    turns: list[dict] = []
    questions: list[dict] = []
    facts: list[dict] = []
    people = list(PEOPLE)
    rng.shuffle(people)
    for index in range(CONVERSATIONS):
        (n1, g1), (n2, g2) = people[2 * index], people[2 * index + 1]
        one = Person(n1, **PRONOUNS[g1])
        two = Person(n2, **PRONOUNS[g2])
        conv_turns, conv_questions, conv_facts = _conversation(rng, random.Random(f"{seed}:facts:{index}"), index, one, two)
        turns += conv_turns
        split = "dev" if index % 2 == 0 else "test"
        for number, q in enumerate(conv_questions, start=1):
            questions.append({"id": f"c{index:02d}-q{number:03d}", "split": split, **q})
        for number, f in enumerate(conv_facts, start=1):
            facts.append({"key": f"c{index:02d}-f{number:03d}", "split": split, **f})
    return {"turns": turns, "questions": questions, "facts": facts}


def write(data: dict[str, list[dict[str, Any]]], directory: Path = HERE) -> dict[str, int]:
    """Write the three JSONL files; returns their line counts."""
    jsonl.write_files({TURNS_FILE: data["turns"], QUESTIONS_FILE: data["questions"], FACTS_FILE: data["facts"]},
                      directory)
    return {"turns": len(data["turns"]), "questions": len(data["questions"]), "facts": len(data["facts"])}


def load(directory: Path = HERE) -> dict[str, list[dict[str, Any]]]:
    """Read the committed set: {"turns": [...], "questions": [...], "facts": [...]}."""
    return jsonl.read_files({"turns": TURNS_FILE, "questions": QUESTIONS_FILE, "facts": FACTS_FILE}, directory)


def main() -> None:
    counts = write(build())
    print(", ".join(f"{v} {k}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
