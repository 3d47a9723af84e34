"""Device pairing: the short authentication string, the commitment and code of a pairing, and
the sealed bundle that hands the vault key to the new device. Pure functions, no I/O."""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tiermem.core.errors import (
    MalformedKey,
    TamperedData,
    WrongKey,
)
from tiermem.sync.crypto.base import (
    AGENT_TAG_LEN,
    INFO_PAIRING,
    KEY_LEN,
    NONCE_LEN,
    PAIRING_CODE_LABEL,
    PAIRING_COMMIT_LABEL,
    SAS_LABEL,
    TAG_LEN,
    X25519_LEN,
    check_epoch,
    check_key,
    hkdf,
    lp,
    random_or,
)
from tiermem.sync.crypto.wraps import device_public_bytes, load_device_public_key

_SAS_WORDLIST: Final = (
    "aardvark absurd accrue acme adrift adult afflict ahead aimless algol allow alone ammo "
    "ancient apple artist assume athens atlas aztec baboon backfield backward banjo beaming "
    "bedlamp beehive beeswax befriend belfast berserk billiard bison blackjack blockade "
    "blowtorch bluebird bombast bookshelf brackish breadline breakup brickyard briefcase "
    "burbank button buzzard cement chairlift chatter checkup chisel choking chopper christmas "
    "clamshell classic classroom cleanup clockwork cobra commence concert cowbell crackdown "
    "cranky crowfoot crucial crumpled crusade cubic dashboard deadbolt deckhand dogsled "
    "dragnet drainage dreadful drifter dropper drumbeat drunken dupont dwelling eating edict "
    "egghead eightball endorse endow enlist erase escape exceed eyeglass eyetooth facial "
    "fallout flagpole flatfoot flytrap fracture framework freedom frighten gazelle geiger "
    "glitter glucose goggles goldfish gremlin guidance hamlet highchair hockey indoors "
    "indulge inverse involve island jawbone keyboard kickoff kiwi klaxon locale lockup merit "
    "minnow miser mohawk mural music necklace neptune newborn nightbird oakland obtuse "
    "offload optic orca payday peachy pheasant physique playhouse pluto preclude prefer "
    "preshrunk printer prowler pupil puppy python quadrant quiver quota ragtime ratchet "
    "rebirth reform regain reindeer rematch repay retouch revenge reward rhythm ribcage "
    "ringbolt robust rocker ruffled sailboat sawdust scallion scenic scorecard scotland "
    "seabird select sentence shadow shamrock showgirl skullcap skydive slingshot slowdown "
    "snapline snapshot snowcap snowslide solo southward soybean spaniel spearhead spellbind "
    "spheroid spigot spindle spyglass stagehand stagnate stairway standard stapler steamship "
    "sterling stockman stopwatch stormy sugar surmount suspense sweatband swelter tactics "
    "talon tapeworm tempest tiger tissue tonic topmost tracker transit trauma treadmill "
    "trojan trouble tumor tunnel tycoon uncut unearth unwind uproot upset upshot vapor "
    "village virus vulcan waffle wallet watchword wayside willow woodlark zulu"
)
_SAS_WORDS: Final = tuple(_SAS_WORDLIST.split())
_SAS_LEN: Final = 6  # 48 bits


def short_auth_string(public_key: X25519PublicKey | bytes) -> str:
    """Six words (48 bits) from ``SHA-256("tiermem/v1/sas" | public key)``, for both screens to
    show during pairing so a swapped key is noticed."""
    raw = public_key if isinstance(public_key, bytes) else public_key.public_bytes_raw()
    if len(raw) != X25519_LEN:
        raise MalformedKey(f"a device public key is {X25519_LEN} bytes, got {len(raw)}")
    digest = hashlib.sha256(SAS_LABEL + raw).digest()
    return " ".join(_SAS_WORDS[b] for b in digest[:_SAS_LEN])


# Pairing ----------------------------------------------------------------------------------

PAIRING_NONCE_LEN: Final = 16


@dataclass(frozen=True, slots=True)
class PairingTranscript:
    """Everything both devices saw during one pairing. The code shown on both screens and the
    answer's key are derived from all of it, so a key swapped by the server changes the code."""

    agent_id: str
    pairing_id: bytes
    new_public: bytes  # X25519 key, then (newer devices) their Ed25519 roster signing key
    new_nonce: bytes
    approver_public: bytes
    approver_nonce: bytes

    def to_bytes(self) -> bytes:
        return (
            lp(self.agent_id.encode())
            + lp(self.pairing_id)
            + lp(self.new_public)
            + lp(self.new_nonce)
            + lp(self.approver_public)
            + lp(self.approver_nonce)
        )


def pairing_commitment(new_public: bytes, new_nonce: bytes) -> bytes:
    """What the new device posts first: ``SHA-256(label | lp(public) | lp(nonce))``. It reveals
    the nonce only after the existing device's nonce is on the server, so nobody in between can
    search for two keys whose codes collide (the Bluetooth numeric-comparison commitment)."""
    if len(new_public) not in (X25519_LEN, 2 * X25519_LEN):
        raise MalformedKey(f"a device public key is {X25519_LEN} bytes, got {len(new_public)}")
    return hashlib.sha256(PAIRING_COMMIT_LABEL + lp(new_public) + lp(new_nonce)).digest()


def pairing_code(transcript: PairingTranscript) -> str:
    """Six words (48 bits) binding both public keys, both nonces, the agent and the pairing."""
    digest = hashlib.sha256(PAIRING_CODE_LABEL + transcript.to_bytes()).digest()
    return " ".join(_SAS_WORDS[b] for b in digest[:_SAS_LEN])


def _pairing_key(own: X25519PrivateKey, peer_public: bytes, transcript: PairingTranscript) -> bytes:
    try:
        shared = own.exchange(load_device_public_key(peer_public))
    except ValueError:
        raise TamperedData("the pairing holds an invalid public key") from None
    salt = hashlib.sha256(transcript.to_bytes()).digest()
    return hkdf(shared, salt, INFO_PAIRING)


_BUNDLE = struct.Struct(">I")
_ANCHOR = struct.Struct(">II")
_HEAD_LEN: Final = 32
_ANCHOR_LEN: Final = _ANCHOR.size + _HEAD_LEN


def seal_pairing_bundle(
    approver_key: X25519PrivateKey,
    transcript: PairingTranscript,
    epoch: int,
    vault_key: bytes,
    *,
    anchor: tuple[int, int, bytes] | None = None,
    tag: bytes | None = None,
    nonce: bytes | None = None,
) -> bytes:
    """The approval: ``nonce | AES-GCM(epoch u32 | vault key [| floor u32 | seq u32 | head
    [| tag]])`` under a key only the two devices of `transcript` can derive (static X25519
    between the approver's device key and the new device's key), associated data = the
    transcript. `anchor` is the approver's epoch floor and its roster's newest entry (number,
    hash); `tag` the vault's keyed agent tag (absent for a vault set up before keyed tags)."""
    check_key(vault_key, "vault key")
    check_epoch(epoch)
    if device_public_bytes(approver_key) != transcript.approver_public:
        raise ValueError("the approver key does not match the transcript")
    key = _pairing_key(approver_key, transcript.new_public[:X25519_LEN], transcript)
    nonce = random_or(nonce, NONCE_LEN, "nonce")
    plain = _BUNDLE.pack(epoch) + vault_key
    if anchor is not None:
        floor, seq, head = anchor
        check_epoch(floor)
        if len(head) not in (0, _HEAD_LEN):
            raise ValueError("a roster head is 32 bytes (none: empty)")
        plain += _ANCHOR.pack(floor, seq) + (head or bytes(_HEAD_LEN))  # zeros: no roster
    if tag is not None:
        if anchor is None or len(tag) != AGENT_TAG_LEN:
            raise ValueError("a tag goes after an anchor and is 16 bytes")
        plain += tag
    return nonce + AESGCM(key).encrypt(nonce, plain, transcript.to_bytes())


def open_pairing_bundle(
    new_key: X25519PrivateKey, transcript: PairingTranscript, blob: bytes
) -> tuple[int, bytes]:
    """(epoch, vault key) of an approval, or `WrongKey` when it was not made by the device whose
    public key is in `transcript` for this very pairing."""
    epoch, vault_key, _, _ = open_pairing_answer(new_key, transcript, blob)
    return epoch, vault_key


def open_pairing_answer(
    new_key: X25519PrivateKey, transcript: PairingTranscript, blob: bytes
) -> tuple[int, bytes, tuple[int, int, bytes] | None, bytes | None]:
    """(epoch, vault key, anchor or None, the vault's keyed agent tag or None) of an approval
    (`open_pairing_bundle`)."""
    if device_public_bytes(new_key) != transcript.new_public[:X25519_LEN]:
        raise ValueError("the device key does not match the transcript")
    plain_len = len(blob) - NONCE_LEN - TAG_LEN
    plain_lens = (0, _ANCHOR_LEN, _ANCHOR_LEN + AGENT_TAG_LEN)
    if plain_len - _BUNDLE.size - KEY_LEN not in plain_lens:
        raise TamperedData("the pairing answer is truncated or has trailing bytes")
    key = _pairing_key(new_key, transcript.approver_public, transcript)
    try:
        plain = AESGCM(key).decrypt(blob[:NONCE_LEN], blob[NONCE_LEN:], transcript.to_bytes())
    except InvalidTag:
        raise WrongKey(
            "the pairing answer does not authenticate: it was not made by the device whose "
            "code was compared"
        ) from None
    (epoch,) = _BUNDLE.unpack_from(plain)
    vault_key = plain[_BUNDLE.size : _BUNDLE.size + KEY_LEN]
    rest = plain[_BUNDLE.size + KEY_LEN :]
    if not rest:
        return epoch, vault_key, None, None
    floor, seq = _ANCHOR.unpack_from(rest)
    head, tag = rest[_ANCHOR.size : _ANCHOR_LEN], rest[_ANCHOR_LEN:]
    if head == bytes(_HEAD_LEN):
        head = b""  # the vault has no roster yet
    return epoch, vault_key, (floor, seq, head), tag or None
