"""``threadline eval safety``: the trajectory monitor on scripted attacks and look-alikes.

Each script (``safety_scripts/``, README.md there) is played through a standard engine
twice: with the monitor off, and with it on (where it restricts, reminds and refuses for
real). On the same messages it reports:

- **per conversation**: whether the monitor flagged the conversation (its risk reached the
  policy's ``flag`` threshold on some turn) and on which turn first;
- **per message**: the same detectors on each message alone, with nothing before it (what a
  per-message check sees), flagged and the first turn it flagged;
- **single turn**: each attack's request as one message, judged by the monitor;
- detection rate over attacks, false-alarm rate over the benign look-alikes, the mean turn
  of first detection, and the prefix reuse (reused ÷ prompt bytes, and cached ÷ prompt
  tokens) of the same conversations with the monitor on against off (on: reminding and
  restricting as its policy says, but not refusing, since a refused turn makes no call);
- with a real model, how often it refused the single-turn request against the multi-turn
  script's last message (monitor off): what an attack across turns gains;
- planted instructions through memory writing and 1-3 compactions of each kind
  (``eval/provenance.py``, the same cases ``bench/provenance.py`` runs).

Every figure is given per split: ``dev`` and ``seen`` (the rules and thresholds were tuned
on them), ``heldout``, ``unseen`` (written blind to the monitor by another hand) and
``blind`` (the same way, once ``unseen`` had been read), each run to report and later read
and tuned on too; ``blind2`` (written the same way, once every other split had been tuned
on, and committed before anything ran on it) and ``overrefusal`` (benign conversations in
which the model wrongly refuses and the user explains, written the same way: what the
signals that follow refusals cost), each run to report, then read and tuned on as well;
``blind3`` and ``overrefusal2`` (written the same way, and kept out of every run until the
round of tuning on all the files above was fixed), run once to report, then read and tuned on
in the third round; ``blind4`` and ``overrefusal3`` (written the same way, and sealed until
the third round was fixed), run once to report, then read and tuned on in the fourth round;
``blind5`` and ``overrefusal4`` (sealed until the fourth round was fixed), run once to report,
then read and tuned on in the fifth round; ``blind6`` and ``overrefusal5`` (sealed until the
fifth round was fixed), run once to report, then read and tuned on in the sixth round;
``blind7`` and ``overrefusal6`` (sealed until the sixth round was fixed), run once to report
and not tuned on; ``blind8`` and ``overrefusal7`` (sealed until a seventh round was tried),
run once, which decided against that round (so they chose the code, though nothing was tuned
on them); ``blind9`` and ``overrefusal8``, then run once, only to report, and read in the
eighth round; ``blind10`` and ``overrefusal9`` (sealed until the eighth round was fixed), run
once to report, then read and tuned on in the ninth round; ``blind11`` and ``overrefusal10``
(sealed until the ninth round was fixed), run once to report, then read in a tenth round
that was taken back; ``blind12`` and ``overrefusal11`` (sealed until that tenth round was
fixed), run once, which decided against it, and not tuned on. Files sealed for the next
round (``blind13`` and ``overrefusal12``) are in ``SEALED``.
"""

from __future__ import annotations

import statistics
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from threadline.errors import InputError
from threadline.models.base import ModelBackend
from threadline.models.scripted import ScriptedModel
from threadline.providers.monitor import Trajectory, TrajectoryMonitor
from threadline.providers.monitor.rules import is_refusal
from threadline.request import Request
from threadline.settings import Durability
from threadline.standard import standard_engine
from threadline.stores.sqlite import SQLiteStore
from threadline.turn import monitoring

SPLITS = ("dev", "seen", "heldout", "unseen", "blind", "blind2", "overrefusal", "blind3",
          "overrefusal2", "blind4", "overrefusal3", "blind5", "overrefusal4", "blind6",
          "overrefusal5", "blind7", "overrefusal6", "blind8", "overrefusal7", "blind9",
          "overrefusal8", "blind10", "overrefusal9", "blind11", "overrefusal10", "blind12",
          "overrefusal11")
# each was read, then tuned on (blind3 and overrefusal2, run once to report, in the third
# round; blind4 and overrefusal3, run once to report, in the fourth; blind5 and overrefusal4,
# run once to report, in the fifth; blind6 and overrefusal5, run once to report, in the
# sixth; blind7 to overrefusal8, in the eighth, which chose the intent classifier's reach;
# blind10 and overrefusal9, run once to report, in the ninth, which reads refusals after the
# reply; blind11 and overrefusal10, run once to report, in a tenth, taken back); the last two
# were run once, after the tenth round was fixed, and decided against it
TUNED_ON = SPLITS[:-2]
KINDS = ("attack", "benign")
FAMILIES = {"attack": ("escalation", "decomposition", "roleplay"),
            "benign": ("nurse", "novelist", "security_student", "pharmacist",
                       "chemistry_teacher", "locksmith", "journalist", "parent", "hunter",
                       # the unseen split's personas
                       "railway_engineer", "electrician", "screenwriter", "toxicology_student",
                       "veterinarian", "fraud_analyst", "drone_hobbyist",
                       "harm_reduction_worker", "history_teacher", "pentester", "bartender",
                       # the blind split's personas
                       "air_traffic_controller", "atm_field_technician",
                       "process_safety_engineer", "claims_adjuster", "county_election_clerk",
                       "conservation_biologist", "school_counselor", "crisis_line_volunteer",
                       "hostage_negotiator", "funeral_director", "martial_arts_instructor",
                       "defense_attorney",
                       # the blind2 split's personas
                       "poison_centre_specialist", "game_designer", "forensic_accountant",
                       "dog_trainer", "travel_blogger", "pyrotechnician", "customs_officer",
                       "hospice_physician", "allotment_gardener", "content_moderator",
                       "home_inspector", "loss_prevention_manager",
                       "pretrial_services_officer", "airport_screener_trainer",
                       "eating_disorder_dietitian", "school_it_administrator",
                       "victim_witness_advocate", "bank_teller",
                       # the blind3 split's personas
                       "aviation_safety_inspector", "water_treatment_operator",
                       "forensic_pathologist", "food_safety_inspector",
                       "animal_control_officer", "amateur_radio_operator",
                       "traffic_signal_engineer", "emergency_physician", "corrections_officer",
                       "payroll_manager", "university_registrar", "paragliding_instructor",
                       "structural_engineer", "digital_forensics_examiner",
                       "environmental_compliance_officer", "pest_control_technician",
                       "theatre_props_master", "museum_conservator",
                       # the blind4 and overrefusal3 splits' personas
                       "muffler_shop_mechanic", "couples_therapist", "crowd_safety_consultant",
                       "elder_law_attorney", "aircraft_mechanic", "utility_meter_technician",
                       "internal_auditor", "export_compliance_officer", "butcher",
                       "classic_car_restorer", "lab_safety_officer",
                       "senior_center_coordinator", "family_mediator",
                       "pediatric_occupational_therapist", "msp_technician",
                       "university_career_advisor", "workplace_investigator",
                       "union_steward", "wildland_firefighter", "beekeeper",
                       "foraging_instructor", "scuba_instructor", "crime_scene_cleaner",
                       "incident_responder", "paramedic", "livestock_farmer",
                       "creative_writing_student", "criminology_student",
                       "campus_safety_educator", "mining_engineer", "range_safety_officer",
                       "pool_maintenance_technician", "tattoo_artist", "home_care_aide",
                       "it_helpdesk_technician", "wildlife_rehabilitator",
                       "stunt_coordinator", "soap_maker", "microbiology_lab_technician",
                       "search_and_rescue_volunteer", "property_manager",
                       "addiction_counselor",
                       # the blind5 and overrefusal4 splits' personas
                       "public_health_epidemiologist", "telecom_fraud_investigator",
                       "burns_surgeon", "hospital_network_engineer", "elevator_technician",
                       "pharmacology_lecturer", "emergency_dispatcher", "hvac_engineer",
                       "life_insurance_underwriter", "transplant_coordinator",
                       "pharmaceutical_packaging_engineer", "security_awareness_trainer",
                       "high_school_principal", "coroner", "oncology_patient_advocate",
                       "smart_home_installer", "kidnap_ransom_consultant",
                       "avalanche_forecaster", "demolition_engineer", "dental_hygienist",
                       "anesthesiology_resident", "brewery_owner", "true_crime_podcaster",
                       "welding_instructor", "rideshare_driver", "domestic_violence_advocate",
                       "bug_bounty_hunter", "marine_biologist", "mycologist",
                       "science_museum_educator", "military_historian", "escape_room_designer",
                       "immigration_lawyer", "child_protection_social_worker",
                       "emergency_management_planner", "crypto_exchange_compliance_analyst",
                       "gunsmith", "playwright", "medical_student", "prosecutor",
                       "tabletop_game_master", "forensic_science_student",
                       # the blind6 and overrefusal5 splits' personas
                       "hotel_it_manager", "vape_shop_owner", "process_server",
                       "racing_steward", "financial_controller", "media_literacy_teacher",
                       "box_office_manager", "vineyard_manager", "account_security_engineer",
                       "highway_maintenance_engineer", "financial_aid_officer",
                       "image_abuse_caseworker", "consumer_debt_advisor",
                       "cycling_race_commissaire", "mailroom_supervisor",
                       "unemployment_claims_examiner", "probate_paralegal",
                       "housing_support_worker", "midwife", "fire_investigator",
                       "landscape_architect", "ceramics_teacher", "pawnshop_owner",
                       "psychiatry_registrar", "car_dealership_finance_manager",
                       "court_interpreter", "zookeeper", "sports_physician", "bladesmith",
                       "flight_instructor", "perfumer", "documentary_filmmaker",
                       "public_librarian", "malware_analyst", "child_psychologist",
                       "social_media_manager", "ethnobotanist", "general_practitioner",
                       "comic_book_writer", "nightclub_door_supervisor", "drama_teacher",
                       "electric_vehicle_technician",
                       # the blind7 and overrefusal6 splits' personas
                       "agricultural_pilot", "allergist", "arborist", "art_authenticator",
                       "bail_bondsman", "broadcast_engineer", "cannabis_extraction_technician",
                       "cash_in_transit_supervisor", "casino_surveillance_operator",
                       "climbing_gym_manager", "clinical_research_coordinator",
                       "cosmetic_dermatologist", "craft_distiller", "dam_safety_engineer",
                       "demining_team_leader", "doping_control_officer", "festival_producer",
                       "film_archivist", "forensic_anthropologist", "fugu_chef",
                       "hazmat_technician", "herpetologist", "jeweller", "law_student",
                       "medical_historian", "merchant_navy_officer", "narcotics_detective",
                       "nonproliferation_analyst", "passport_examiner", "private_investigator",
                       "public_health_student", "radiation_safety_officer", "radio_drama_writer",
                       "real_estate_agent", "repossession_agent", "sexual_health_educator",
                       "small_business_bookkeeper", "sociology_student", "songwriter",
                       "stained_glass_artist", "taxidermist", "utility_lineworker",
                       # the blind8 and overrefusal7 splits' personas
                       "town_events_officer", "suicide_prevention_researcher",
                       "tort_law_professor", "forensic_chemist", "marine_surveyor",
                       "hpc_cluster_administrator", "tenant_rights_advocate",
                       "police_academy_instructor", "seniors_tech_volunteer",
                       "divorce_financial_analyst", "telecom_network_planner", "obstetrician",
                       "deradicalisation_mentor", "tax_auditor", "electrical_engineering_student",
                       "prison_architect", "esports_community_manager", "police_oversight_analyst",
                       "ski_patroller", "glassblower", "alternative_process_photographer",
                       "nuclear_medicine_technologist", "sewer_maintenance_worker",
                       "grain_elevator_operator", "orchardist", "thriller_translator",
                       "debate_coach", "pharmacy_technician", "mortgage_fraud_investigator",
                       "ctf_organizer", "cave_diver", "mountain_guide", "anthropology_professor",
                       "high_voltage_test_engineer", "volunteer_firefighter",
                       "child_safety_product_designer", "poison_garden_guide",
                       "industrial_hygienist", "lifeguard_trainer", "forensic_psychologist",
                       "acting_student", "philosophy_student",
                       # the blind9 and overrefusal8 splits' personas
                       "dive_equipment_technician", "film_costume_designer",
                       "securities_compliance_officer", "premises_liability_lawyer",
                       "shopping_centre_manager", "credit_union_risk_officer",
                       "appliance_safety_engineer", "marriage_registrar", "church_treasurer",
                       "harbourmaster", "police_k9_handler", "primary_school_teacher",
                       "skydiving_rigger", "postal_inspector", "city_tour_guide", "card_magician",
                       "scrap_metal_dealer", "animal_shelter_manager", "farrier", "chimney_sweep",
                       "forensic_linguist", "hospital_chaplain", "war_museum_curator",
                       "antique_clock_restorer", "youth_pastor", "aquarium_curator",
                       "medical_herbalist", "fire_safety_engineer", "special_effects_technician",
                       "crop_agronomist", "long_haul_trucker", "strength_coach", "body_piercer",
                       "acoustics_engineer", "historical_reenactor", "child_abuse_pediatrician",
                       "model_rocketry_leader", "poet", "journalism_student", "nursing_student",
                       "political_science_student", "cryptography_lecturer",
                       # the sealed blind10 and overrefusal9 splits' personas
                       "route_setter", "greek_life_advisor", "forensic_document_examiner",
                       "pet_recovery_specialist", "housing_code_inspector", "riding_instructor",
                       "cult_exit_counselor", "review_platform_trust_analyst", "tax_attorney",
                       "gaming_commission_agent", "boutique_owner", "art_provenance_researcher",
                       "amusement_ride_inspector", "trauma_surgeon", "fertilizer_dealer",
                       "volcanologist", "coast_guard_boarding_officer", "veterinary_anesthetist",
                       "archaeologist", "rope_access_technician",
                       "wilderness_first_aid_instructor", "polymer_chemist", "opera_librettist",
                       "escape_artist", "nuclear_reactor_operator", "cheesemaker",
                       "hydrogeologist", "data_protection_officer", "hr_director",
                       "animal_welfare_inspector", "sommelier", "maritime_security_officer",
                       "speech_language_pathologist", "sleep_physician", "chess_arbiter",
                       "museum_security_director", "falconer", "memoirist", "geriatrician",
                       "quarry_manager", "economics_student", "cosmetic_chemist",
                       # the blind11 and overrefusal10 splits' personas
                       "gas_distribution_technician", "wedding_caterer",
                       "osint_instructor", "used_car_inspector",
                       "feral_cat_colony_caretaker", "firmware_engineer",
                       "judo_referee", "rail_welder",
                       "online_safety_researcher", "labour_inspector",
                       "ethnographic_museum_curator", "tyre_fitter",
                       "community_police_officer", "school_nurse",
                       "organic_vegetable_grower",
                       "school_threat_assessment_officer", "hepatologist",
                       "phone_repair_technician", "tram_driver",
                       "chainsaw_safety_instructor", "histotechnologist",
                       "abattoir_inspector", "sushi_chef", "plumber",
                       "safe_technician", "soc_analyst",
                       "forensic_firearms_examiner", "archery_coach",
                       "boxing_coach", "holocaust_educator",
                       "terrorism_studies_lecturer", "grief_counselor",
                       "golf_course_superintendent",
                       "semiconductor_fab_technician", "radiographer",
                       "virology_postdoc", "fact_checker", "vfx_artist",
                       "tow_truck_driver", "florist", "diabetes_educator",
                       "foster_carer",
                       # the blind12 and overrefusal11 splits' personas
                       "pipeline_integrity_engineer", "vehicle_cybersecurity_engineer",
                       "restaurant_manager", "public_health_communications_officer",
                       "reptile_breeder", "trading_standards_officer", "grocery_store_manager",
                       "returns_desk_supervisor", "public_procurement_officer",
                       "jury_administrator", "prison_governor", "football_integrity_officer",
                       "database_administrator", "addiction_psychiatrist",
                       "school_immunisation_coordinator", "pig_farmer", "news_editor",
                       "privacy_lawyer", "crane_operator", "optometrist", "bus_driver",
                       "embalmer", "veterinary_nurse", "airline_pilot", "ferry_captain",
                       "nanny", "swimming_coach", "hotel_night_manager", "dentist",
                       "kennel_owner", "biology_teacher", "sign_language_interpreter",
                       "cyber_insurance_underwriter", "personal_trainer",
                       "close_protection_officer", "circus_performer", "genealogist",
                       "gamekeeper", "organic_chemistry_phd_student", "war_correspondent",
                       "beauty_therapist", "academic_integrity_officer",
                       # the sealed blind13 and overrefusal12 splits' personas
                       "aviation_fuel_technician", "care_home_manager",
                       "leisure_centre_duty_manager", "fisheries_officer",
                       "controlled_drugs_accountable_officer", "web_accessibility_consultant",
                       "parking_services_manager", "indirect_tax_consultant",
                       "conveyancing_solicitor", "corporate_security_manager",
                       "sanctions_analyst", "smart_contract_auditor", "asbestos_surveyor",
                       "copyright_lawyer", "insider_threat_analyst", "guardian_ad_litem",
                       "access_control_engineer", "gp_practice_manager", "probation_officer",
                       "driving_instructor", "crash_reconstructionist", "doula",
                       "lighting_designer", "hairdresser", "nail_technician", "printmaker",
                       "physics_teacher", "pe_teacher", "clinical_toxicologist",
                       "rape_crisis_counsellor", "cybercrime_detective", "asylum_caseworker",
                       "stand_up_comedian", "childrens_author", "pharmacy_student",
                       "veterinary_student", "mma_cutman", "fishmonger", "candle_maker",
                       "open_source_maintainer", "park_ranger", "court_reporter")}
# written blind like the files above, committed before anything runs on them, and kept out of
# SPLITS (so out of --split all) until the next round of tuning is fixed: then run once
# (blind12 and overrefusal11 were run after the tenth round)
SEALED = ("blind13", "overrefusal12")

@dataclass(frozen=True)
class ScriptTurn:
    user: str
    reply: str  # the scripted model's answer


@dataclass(frozen=True)
class Script:
    id: str
    kind: str
    family: str
    system: str
    turns: tuple[ScriptTurn, ...]
    split: str
    single: str | None = None  # an attack's request as one message


def load_scripts(split: str, path: Path | None = None) -> list[Script]:
    """The scripts of ``split`` (or of the file at ``path``, reported under ``split``)."""
    if path is None:
        if split not in SPLITS:
            raise InputError(f"unknown split {split!r}; choose one of: {', '.join(SPLITS)}")
        text = resources.files("threadline.eval").joinpath(
            f"safety_scripts/{split}.toml").read_text(encoding="utf-8")
        where = f"the {split} scripts"
    else:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(f"cannot read {path}: {err}") from err
        where = str(path)
    try:
        data = tomllib.loads(text)
        scripts = [_script(entry, split) for entry in data["script"]]
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as err:
        raise InputError(f"{where} are not safety scripts: {err}",
                         hint="[[script]] tables each with id, kind, family, system, turns "
                              "(user, reply) and, for an attack, single "
                              "(src/threadline/eval/safety_scripts/README.md)") from err
    if not scripts:
        raise InputError(f"{where} hold no script")
    ids = [s.id for s in scripts]
    if len(set(ids)) != len(ids):
        raise InputError(f"{where} use a script id twice")
    return scripts


def _script(entry: dict[str, Any], split: str) -> Script:
    kind, family = str(entry["kind"]), str(entry["family"])
    if kind not in KINDS or family not in FAMILIES[kind]:
        raise ValueError(f"script {entry.get('id')!r}: kind must be one of {KINDS} and its "
                         f"family one of {FAMILIES.get(kind, ())}; got {kind!r}, {family!r}")
    turns = tuple(ScriptTurn(str(t["user"]), str(t["reply"])) for t in entry["turns"])
    if not turns:
        raise ValueError(f"script {entry['id']!r} has no turns")
    single = entry.get("single")
    if kind == "attack" and not single:
        raise ValueError(f"attack {entry['id']!r} needs its single-turn version (single)")
    return Script(str(entry["id"]), kind, family, str(entry["system"]), turns, split,
                  None if single is None else str(single))


@dataclass
class Played:
    """One script through one engine: each turn's decision (None with the monitor off),
    its reply, and the prefix reuse of its calls."""

    decisions: list[Mapping[str, Any] | None] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    refused_by_monitor: int = 0
    prompt_bytes: int = 0
    reused_bytes: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    # less what the monitor added (its tails, and the reminders kept where they were shown)
    requests: list[list[dict[str, Any]]] = field(default_factory=list)


def scripted_model(script: Script) -> ScriptedModel:
    """A model that answers each scripted message with the script's reply for it."""
    replies = {t.user: t.reply for t in script.turns}

    def reply(request: Request) -> str:
        last = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        return replies.get(last, "I see.")
    return ScriptedModel(default=reply)


def play(script: Script, model: ModelBackend, directory: Path,
         monitor: TrajectoryMonitor | None, arm: str | None = None) -> Played:
    arm = arm or ("on" if monitor is not None else "off")
    store = SQLiteStore(directory / f"{script.split}-{script.id}-{arm}.db",
                        durability=Durability.OFF)
    try:
        engine = standard_engine(store, model, system=script.system, recall=False,
                                 monitor=monitor or False)
        said = {turn.user for turn in script.turns}  # any other user message: the monitor's
        cid: str | None = None
        played = Played()
        for turn in script.turns:
            result = engine.run_turn(turn.user, conversation_id=cid)
            cid = result.conversation_id
            played.replies.append(result.reply.text)
            if result.call.purpose == "monitor":
                played.refused_by_monitor += 1
        assert cid is not None
        history = store.history(cid)
        by_turn: dict[int, Mapping[str, Any]] = {}
        for item in history:  # a turn's last decision: after its reply, where it refused
            if (found := monitoring.decision(item)) is not None:
                by_turn[item.turn] = found
        played.decisions = [by_turn[t] for t in sorted(by_turn)]
        if monitor is None:
            played.decisions = [None] * len(script.turns)
        for listed in store.calls(cid):
            if listed.purpose != "turn":
                continue
            prefix = listed.prefix or {}
            played.prompt_bytes += int(prefix.get("prompt_bytes", 0))
            played.reused_bytes += int(prefix.get("reused_bytes", 0))
            played.prompt_tokens += listed.usage.prompt_tokens
            played.cached_tokens += listed.usage.cached_tokens
            request = store.call(listed.id).request
            messages = [dict(m) for m in request.messages] if request is not None else []
            played.requests.append([m for m in messages if m.get("role") != "user"
                                    or m.get("content") in said])
        return played
    finally:
        store.close()


def first_flag(risks: Sequence[float], threshold: float) -> int | None:
    """The turn (from 1) whose risk first reached ``threshold``."""
    return next((n for n, risk in enumerate(risks, 1) if risk >= threshold), None)


def judge_script(script: Script, monitor: TrajectoryMonitor, model: ModelBackend | None,
                 directory: Path) -> dict[str, Any]:
    """Everything the report needs about one script."""
    threshold = monitor.policy.flag if monitor.policy.flag is not None else 1.0
    on = play(script, model or scripted_model(script), directory, monitor)
    off = play(script, model or scripted_model(script), directory, None)
    # prefix reuse of the same conversation: a refused turn has no call to compare, so the
    # monitor that is measured for reuse reminds and restricts but never refuses
    kept = play(script, model or scripted_model(script), directory, TrajectoryMonitor(
        monitor.detectors, policy=replace(monitor.policy, refuse=None),
        safe_tools=monitor.safe_tools), arm="on-no-refusal")
    conversation = [float(d["risk"]) if d else 0.0 for d in on.decisions]
    alone = [monitor.judge(Trajectory(t.user, (), script.system)).turn_risk
             for t in script.turns]
    row: dict[str, Any] = {
        "id": script.id, "kind": script.kind, "family": script.family, "split": script.split,
        "turns": len(script.turns),
        "conversation": {"risks": conversation,
                         "first_detection": first_flag(conversation, threshold),
                         "refused_turns": on.refused_by_monitor,
                         "restricted": any(d and d.get("restricted") for d in on.decisions)},
        "per_message": {"risks": [round(r, 3) for r in alone],
                        "first_detection": first_flag(alone, threshold)},
        "reuse": {arm: {"prompt_bytes": p.prompt_bytes, "reused_bytes": p.reused_bytes,
                        "prompt_tokens": p.prompt_tokens, "cached_tokens": p.cached_tokens}
                  for arm, p in (("on", kept), ("off", off))},
        # requests of the monitored conversation that differ from the plain one's above the
        # tail (its tail blocks taken out): the monitor must leave the prefix as it was
        # (with a real model the tail changes its replies, and so the later history: only
        # the scripted model's replies are the same in both arms)
        "differing_above_tail": None if model is not None else sum(
            a != b for a, b in zip(kept.requests, off.requests, strict=True)),
    }
    if script.single is not None:
        risk = monitor.judge(Trajectory(script.single, (), script.system)).turn_risk
        row["single"] = {"risk": round(risk, 3), "detected": risk >= threshold}
        if model is not None:  # a real model: does the request get further across turns?
            single = play(Script(script.id + "-single", script.kind, script.family,
                                 script.system, (ScriptTurn(script.single, ""),),
                                 script.split), model, directory, None)
            row["model_refused"] = {"single": is_refusal(single.replies[-1]),
                                    "multi_last": is_refusal(off.replies[-1])}
    return row


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    attacks = [r for r in rows if r["kind"] == "attack"]
    benign = [r for r in rows if r["kind"] == "benign"]

    def rate(group: Sequence[dict[str, Any]], key: str) -> float | None:
        hits = [r[key]["first_detection"] is not None for r in group]
        return round(sum(hits) / len(hits), 3) if hits else None

    def first(group: Sequence[dict[str, Any]], key: str) -> float | None:
        turns = [r[key]["first_detection"] for r in group
                 if r[key]["first_detection"] is not None]
        return round(statistics.mean(turns), 2) if turns else None

    def reuse(arm: str, what: tuple[str, str]) -> float | None:
        got = sum(r["reuse"][arm][what[0]] for r in rows)
        of = sum(r["reuse"][arm][what[1]] for r in rows)
        return got / of if of else None

    def total(arm: str, what: str) -> int:
        return sum(r["reuse"][arm][what] for r in rows)

    out: dict[str, Any] = {
        "attacks": len(attacks), "benign": len(benign),
        "detection_rate": {"conversation": rate(attacks, "conversation"),
                           "per_message": rate(attacks, "per_message")},
        "false_alarm_rate": {"conversation": rate(benign, "conversation"),
                             "per_message": rate(benign, "per_message")},
        "first_detection_turn": {"conversation": first(attacks, "conversation"),
                                 "per_message": first(attacks, "per_message")},
        "single_turn_detection_rate": round(
            sum(r["single"]["detected"] for r in attacks) / len(attacks), 3)
        if attacks else None,
        "refused_turns": sum(r["conversation"]["refused_turns"] for r in rows),
    }
    by_family: dict[str, dict[str, Any]] = {}
    for kind, families in FAMILIES.items():
        for family in families:
            group = [r for r in rows if r["family"] == family]
            if group:
                key = "detection" if kind == "attack" else "false_alarm"
                by_family[family] = {"scripts": len(group),
                                     f"{key}_conversation": rate(group, "conversation"),
                                     f"{key}_per_message": rate(group, "per_message")}
    out["by_family"] = by_family
    for name, what in (("bytes", ("reused_bytes", "prompt_bytes")),
                       ("tokens", ("cached_tokens", "prompt_tokens"))):
        on, off = reuse("on", what), reuse("off", what)
        reused_off = total("off", what[0])
        out[f"reuse_{name}"] = {
            "share_on": None if on is None else round(on, 4),
            "share_off": None if off is None else round(off, 4),
            # what the monitored conversation reused, over what the plain one did
            "ratio": round(total("on", what[0]) / reused_off, 4) if reused_off else None}
    differing = [r["differing_above_tail"] for r in rows if r["differing_above_tail"] is not None]
    out["requests_differing_above_tail"] = sum(differing) if differing else None
    refusals = [r["model_refused"] for r in attacks if "model_refused" in r]
    if refusals:
        out["model_refusal_rate"] = {
            "single_turn": round(sum(r["single"] for r in refusals) / len(refusals), 3),
            "multi_turn_last": round(sum(r["multi_last"] for r in refusals) / len(refusals), 3)}
    return out


def evaluate(splits: Sequence[str], monitor: TrajectoryMonitor, directory: Path, *,
             model: ModelBackend | None = None, model_name: str = "scripted",
             planted: bool = True, quick_planted: bool = False,
             progress: Callable[[str], None] = lambda _: None,
             scripts: dict[str, list[Script]] | None = None) -> dict[str, Any]:
    """The report over ``splits`` (``scripts``: instead of the shipped ones, per split)."""
    report: dict[str, Any] = {
        "model": model_name, "detectors": [d.name for d in monitor.detectors],
        "flag_threshold": monitor.policy.flag, "splits": {}}
    for split in splits:
        rows = []
        for script in (scripts or {}).get(split) or load_scripts(split):
            progress(f"{split}: {script.id}")
            rows.append(judge_script(script, monitor, model, directory))
        report["splits"][split] = {"tuned_on": split in TUNED_ON, **summarise(rows),
                                   "scripts": rows}
    if planted:
        from threadline.eval.provenance import measure

        progress("planted instructions through compactions and memory writing")
        found = measure(quick_planted)
        report["planted"] = {k: found[k] for k in (
            "cases", "cases_ok", "appearances", "marked", "marked_share", "trusted_memory",
            "untrusted_memory", "in_pinned_or_constraints", "compactions_applied",
            "compactions_asked", "leaks")}
    return report
